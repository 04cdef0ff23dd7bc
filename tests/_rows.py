"""Shared by the format tests: runs as the rows `logbook parse` writes, compared exactly."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from logbook.run import Run
from logbook.segments import stitch
from logbook.textio import read_lines


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
