"""``logbook compare``: several runs side by side, aligned by step, tokens or time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from logbook.run import Run

COMPARE_SUFFIX = ".html"


def register(app: typer.Typer) -> None:
    """Add the command to the app."""
    app.command("compare")(compare)


def compare(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="One run per argument (raw log, generic JSONL or logbook JSONL/Parquet); "
            "a file holding several runs gives each of them."
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Also write the comparison here (.html)."),
    ] = None,
    align: Annotated[
        str,
        typer.Option("--align", help="Align the runs by step, tokens or time (wall clock)."),
    ] = "step",
    fmt: Annotated[
        str | None, typer.Option("--format", "-f", help="Log format; sniffed when not given.")
    ] = None,
    tz: Annotated[
        str, typer.Option("--tz", help="Time zone of log times written without one.")
    ] = "UTC",
) -> None:
    """Compare runs: a table of each run's headline figures, and with -o an HTML page
    with one overlay figure per metric, each run's incidents side by side and the config
    keys whose values differ."""
    from logbook.compare import ALIGNS, build_comparison, write_comparison
    from logbook.compare.table import terminal_table
    from logbook.errors import UsageError

    if align not in ALIGNS:
        raise UsageError(f"--align {align!r}: one of {', '.join(ALIGNS)}")
    if not runs:
        raise UsageError("no run given (logbook compare RUN RUN... [-o compare.html])")
    if output is not None:
        _check_output(output)
    comparison = build_comparison(_load(runs, fmt, tz), align)
    typer.echo(terminal_table(comparison.headlines))
    if output is not None:
        written = write_comparison(comparison, output)
        typer.echo(
            f"wrote {written}: {len(comparison.runs)} runs aligned by {align}, "
            f"{len(comparison.figures)} figure(s), {len(comparison.config.rows)} config "
            "key(s) differ"
        )


def _check_output(output: Path) -> None:
    from logbook.atomic import require_folder
    from logbook.errors import UsageError

    if output.suffix.lower() != COMPARE_SUFFIX:
        raise UsageError(
            f"output {output}: a comparison is .html, "
            f"not {output.suffix or 'a name without a suffix'!r}"
        )
    if output.is_dir():
        raise UsageError(f"output {output}: is a directory")
    require_folder(output)


def _load(paths: list[Path], fmt: str | None, tz: str) -> list[Run]:
    """Each argument's runs, in order: one argument is one run (or each run it holds)."""
    from logbook.cli_runs import load_runs

    runs: list[Run] = []
    for path in paths:
        runs += load_runs([path], fmt, tz)
    return runs
