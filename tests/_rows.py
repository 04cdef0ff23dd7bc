"""Shared by the format tests: runs as the rows `logbook parse` writes, compared exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType

import parsers
from logbook.run import Run
from logbook.schema import event_to_dict
from logbook.segments import stitch
from logbook.textio import read_lines, split_lines


def normalized(lines: list[str]) -> list[str]:
    """JSON rows with their keys sorted, so that key order does not matter."""
    return [json.dumps(json.loads(x), sort_keys=True) for x in lines]


def written_rows(run: Run, tmp: Path) -> list[str]:
    """The metrics and event rows of ``run`` as written to logbook JSONL (no header)."""
    out = tmp / "out.jsonl"
    run.write(out)
    return normalized(out.read_text().splitlines()[1:])


def text_run(parser: ModuleType, path: Path) -> Run:
    """One text log read by one parser module and stitched on its own."""
    part = parser.parse(read_lines(path)[0], str(path))
    metrics, events = stitch([part], [str(path)])
    return Run(metrics=metrics, events=events)


def file_rows(path: Path) -> list[str]:
    """The rows of an expected-output file, keys sorted."""
    return normalized(path.read_text().splitlines())


def assert_lines_accounted(parsed, n_lines: int) -> None:
    """Every physical line is exactly one of record / event / ignored / unrecognized
    (lines joined into a wrapped record count with it)."""
    records = set(parsed.metrics.get_column("line").to_list())
    events = {e.source.line for e in parsed.events}
    unknown = set(parsed.unrecognized.to_list())
    assert not (records & events) and not (records & unknown) and not (events & unknown)
    extra = parsed.meta.get("continued_lines", 0)
    assert len(records) + extra + len(events) + parsed.ignored + len(unknown) == n_lines


def parse_accounted(parser: ModuleType, text: str, name: str = "x.log"):
    """Parse ``text`` with one parser module and check that every line is accounted for."""
    lines, _ = split_lines(text.encode())
    parsed = parser.parse(lines, name)
    assert_lines_accounted(parsed, lines.height)
    return parsed


def files_run(tmp_path: Path, *texts: str) -> Run:
    """The run read from one log file per text (job0.log, job1.log, ...), stitched."""
    paths = []
    for i, text in enumerate(texts):
        p = tmp_path / f"job{i}.log"
        p.write_text(text)
        paths.append(p)
    return parsers.read_log(paths)


def events_of(run_or_parsed, kind: str) -> list[dict]:
    """The events of one kind as dicts, without their source and text."""
    out = [event_to_dict(e) for e in run_or_parsed.events if e.kind == kind]
    for d in out:
        d.pop("source", None)
        d.pop("text", None)
    return out


def assert_fixture_rows(parser: ModuleType, fixtures: Path, case: str, tmp: Path) -> None:
    """The rows ``logbook parse`` writes for ``fixtures/case`` are exactly those of its
    ``.expected.jsonl`` (read from the fixture folder, so that sources are relative)."""
    cwd = Path.cwd()
    os.chdir(fixtures)
    try:
        got = written_rows(text_run(parser, Path(case)), tmp)
    finally:
        os.chdir(cwd)
    expected = (fixtures / (Path(case).stem + ".expected.jsonl")).read_text().splitlines()
    assert got == normalized(expected)


def only_run(tmp_path: Path, text: str, name: str = "train.log") -> Run:
    """The one run ``parsers.read_logs`` reads from ``text`` written to a file."""
    p = tmp_path / name
    p.write_text(text)
    (run,) = parsers.read_logs(p)
    return run


def one_run(path: Path) -> Run:
    """The one run ``parsers.read_logs`` reads from ``path`` (an error when there are more)."""
    (run,) = parsers.read_logs(path)
    return run


def column(run: Run, name: str) -> list:
    """Column ``name`` of the run's records, as a list."""
    return run.metrics.get_column(name).to_list()
