"""``logbook parse`` and ``logbook formats``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from logbook.run import Run

LogArgs = Annotated[list[Path], typer.Argument(help="Log files of one run (plain or .gz).")]
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
) -> None:
    """Parse raw logs into one normalized run and print what was read."""
    from parsers import read_log
    from parsers.chronicle.notes import attach_notes

    run = attach_notes(read_log(list(logs), fmt, tz), list(notes or []), tz)
    if output is not None:
        _check_output(output)
        run.write(output)
    typer.echo(summary(run))
    if output is not None:
        typer.echo(f"wrote {output}")


def _check_output(path: Path) -> None:
    from logbook.errors import UsageError

    if path.suffix not in (".jsonl", ".parquet"):
        raise UsageError(f"output {path}: name it .jsonl or .parquet")
    if path.is_dir():
        raise UsageError(f"output {path}: is a directory")


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
        line = f"{st.file}: {st.lines:,} lines, {st.records:,} records"
        extra = getattr(st, "ignored", None)
        if extra:
            line += f", {extra:,} ignored (blank, comments, framework noise)"
        line += f", {st.unrecognized:,} unrecognized"
        if st.first_unrecognized:
            line += " (first at line " + ", ".join(map(str, st.first_unrecognized)) + ")"
        if st.invalid_utf8_lines:
            line += f"; {st.invalid_utf8_lines} line(s) with invalid UTF-8 bytes replaced"
        out.append(line)
    for c in run.meta.caveats:
        out.append(f"note: {c}")
    for col, how in run.meta.units.items():
        out.append(f"unit: {col}: {how}")
    return "\n".join(out)


def formats() -> None:
    """List the log formats logbook reads, with one example line each."""
    from parsers import FORMATS

    for name, mod in FORMATS.items():
        typer.echo(f"{name:16} {mod.DESCRIPTION}")
        if mod.EXAMPLE:
            typer.echo(f"{'':16} e.g. {mod.EXAMPLE}")
        if mod.MAPS:
            typer.echo(f"{'':16} maps {mod.MAPS}")
