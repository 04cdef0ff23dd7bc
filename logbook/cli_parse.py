"""``logbook parse`` and ``logbook formats``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from logbook.cli_runs import RunOpt, file_stem, load_runs, run_name
from logbook.run import ParseStats, Run

NAMED = 10  # runs named in the note on an input of several

LogArgs = Annotated[
    list[Path], typer.Argument(help="Log files (plain or .gz): a run's launches, in any order.")
]
FormatOpt = Annotated[
    str | None, typer.Option("--format", "-f", help="Log format; sniffed when not given.")
]


NotesOpt = Annotated[
    list[Path] | None,
    typer.Option("--notes", help="A team logbook or chronicle placed on the run's steps."),
]
TzOpt = Annotated[
    str,
    typer.Option("--tz", help="Zone for logbook times written without one (UTC, ET, PT, CET)."),
]


def register(app: typer.Typer) -> None:
    app.command("parse")(parse)
    app.command("formats")(formats)


def parse(
    logs: LogArgs,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the run here (.jsonl or .parquet)."),
    ] = None,
    fmt: FormatOpt = None,
    notes: NotesOpt = None,
    tz: TzOpt = "UTC",
    run: RunOpt = None,
) -> None:
    """Parse raw logs into normalized runs and print what was read.

    An input that holds several runs gives one summary each; -o DIR/ writes one Parquet
    file per run."""
    from logbook.atomic import require_folder
    from parsers.chronicle.notes import attach_notes

    if output is not None:
        require_folder(output)  # before the work, not after it
    runs = [attach_notes(r, list(notes or []), tz) for r in load_runs(list(logs), fmt, tz, run)]
    targets = _targets(output, runs) if output is not None else []
    for i, r in enumerate(runs):
        if len(runs) > 1:
            typer.echo(f"run {run_name(r, i)}:")
        typer.echo(summary(r))
    if output is not None and len(runs) > 1 and len(targets) == 1:
        # one file asked for: the whole input, stitched as one run, and said so
        runs = [_stitched(list(logs), fmt, tz, list(notes or []), runs)]
        typer.echo(f"note: {runs[0].meta.caveats[-1]}")
    for r, path in zip(runs, targets, strict=False):
        r.write(path)
        typer.echo(f"wrote {path}")


def _stitched(
    logs: list[Path], fmt: str | None, tz: str, notes: list[Path], runs: list[Run]
) -> Run:
    """The input read as one run (``parsers.read_log``), with a caveat naming its runs."""
    from parsers import read_log
    from parsers.chronicle.notes import attach_notes

    whole = attach_notes(read_log(logs, fmt, tz), notes, tz)
    names = ", ".join(run_name(r, i) for i, r in enumerate(runs[:NAMED]))
    if len(runs) > NAMED:
        names += f", ... and {len(runs) - NAMED:,} more"
    whole.meta.caveats.append(
        f"the input holds {len(runs)} runs ({names}): written stitched as one; "
        "-o DIR/ writes one file per run, --run NAME one of them"
    )
    return whole


def _targets(output: Path, runs: list[Run]) -> list[Path]:
    """Where each run is written: the output file, or one file per run in a folder."""
    from logbook.atomic import require_folder
    from logbook.errors import UsageError

    as_dir = output.is_dir() or output.suffix == ""
    require_folder(output)  # (DIR/ itself is made, not the folders above it)
    if as_dir:
        output.mkdir(exist_ok=True)
        names = [file_stem(run_name(r, i)) for i, r in enumerate(runs)]
        return [output / f"{n}.parquet" for n in _unique(names)]
    if output.suffix not in (".jsonl", ".parquet"):
        raise UsageError(f"output {output}: name it .jsonl or .parquet (or DIR/ for one per run)")
    return [output]


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}.{seen[n]}")
    return out


def summary(run: Run) -> str:
    """A few lines saying what was read: records, segments, events, unused lines."""
    m = run.metrics
    steps = m.get_column("step").drop_nulls() if m.height else None
    span = f", steps {steps.min()}..{steps.max()}" if steps is not None and steps.len() else ""
    segs = m.get_column("segment").n_unique() if m.height else 0
    out = [f"{run.meta.format}: {m.height:,} records, {segs} segment(s){span}"]
    kinds = Counter(e.kind for e in run.events)
    if kinds:
        out.append("events: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    else:
        out.append("events: none")
    for st in run.meta.parse:
        out.append(accounting(st))
    for c in run.meta.caveats:
        out.append(f"note: {c}")
    for col, how in run.meta.units.items():
        out.append(f"unit: {col}: {how}")
    return "\n".join(out)


def accounting(st: ParseStats) -> str:
    """One file's line accounting: its lines in records, events, continuations, ignored
    and unrecognized (the five add up to the line count)."""
    first = getattr(st, "first_line", 1) or 1
    where = f"{st.file}" if first == 1 else f"{st.file} (from line {first:,})"
    line = (
        f"{where}: {st.lines:,} lines = {st.record_lines:,} record + {st.event_lines:,} event"
        f" + {st.continuation_lines:,} continuation + {st.ignored:,} ignored"
        f" + {st.unrecognized:,} unrecognized"
    )
    if st.first_unrecognized:
        line += " (first at line " + ", ".join(map(str, st.first_unrecognized)) + ")"
    line += f"; {st.records:,} records"
    if st.overcounted:
        line += f"; {st.overcounted:,} line(s) counted twice"
    if st.invalid_utf8_lines:
        line += f"; {st.invalid_utf8_lines} line(s) with invalid UTF-8 bytes replaced"
    return line


def formats() -> None:
    """List the log formats logbook reads, with one example line each."""
    from parsers import FORMATS

    for name, mod in FORMATS.items():
        typer.echo(f"{name:16} {mod.DESCRIPTION}")
        if mod.EXAMPLE:
            typer.echo(f"{'':16} e.g. {mod.EXAMPLE}")
        if mod.MAPS:
            typer.echo(f"{'':16} maps {mod.MAPS}")
