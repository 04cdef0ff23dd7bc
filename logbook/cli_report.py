"""``logbook report``: the audit of a run as one HTML file (or Markdown)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from logbook.cli_runs import RunOpt, file_stem, load_runs, run_name

REPORT_SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def register(app: typer.Typer) -> None:
    """Add the command to the app."""
    app.command("report")(report)


def report(
    logs: Annotated[
        list[Path] | None,
        typer.Argument(help="Log files of one run (raw, generic JSONL or logbook)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the report here: .html (or .htm), or .md."),
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", "-f", help="Log format; sniffed when not given.")
    ] = None,
    notes: Annotated[
        list[Path] | None,
        typer.Option("--notes", help="Chronicle (team logbook) files to place on the run."),
    ] = None,
    tz: Annotated[
        str, typer.Option("--tz", help="Time zone of chronicle times written without one.")
    ] = "UTC",
    log_format: Annotated[
        str | None, typer.Option("--log-format", hidden=True, help="Same as --format.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Detector thresholds (TOML, or JSON).")
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one threshold: detector.field=value (repeatable)."),
    ] = None,
    no_figures: Annotated[
        bool, typer.Option("--no-figures", help="Leave the figures out (faster).")
    ] = False,
    run: RunOpt = None,
    no_run_reports: Annotated[
        bool,
        typer.Option("--no-run-reports", help="A run store: no report of each run (faster)."),
    ] = False,
) -> None:
    """Write the audit report of a run: summary, figures, restarts and goodput,
    remedies for each critical spike, and sortable tables of findings and events. Given a
    run store (a folder with runs.parquet, see `logbook audit`), the fleet report."""
    from logbook.errors import UsageError

    if not logs:
        raise UsageError("no log file given (logbook report LOG... -o report.html)")
    if output is None:
        raise UsageError("no output given: -o report.html (or -o report.md)")
    if output.is_dir():
        raise UsageError(f"output {output}: is a directory")
    kind = report_kind(output)
    from logbook.atomic import require_folder

    require_folder(output)
    from logbook.report.fleet import fleet_command, store_of

    if (store := store_of(logs)) is not None:
        given = {"--format": fmt or log_format, "--notes": notes, "--config": config,
                 "--set": sets, "--run": run, "--tz": tz != "UTC"}  # fmt: skip
        unused = [k for k, v in given.items() if v]
        fleet_command(store, output, kind, unused, not no_figures, not no_run_reports)
        return
    if no_run_reports:
        raise UsageError("--no-run-reports: for a run store (logbook report STORE -o fleet.html)")
    if log_format is not None and fmt is not None and log_format != fmt:
        raise UsageError(f"--format {fmt!r} and --log-format {log_format!r} disagree")
    from logbook.report import build_report, write_report

    analysed = _analyse(logs, fmt or log_format, notes or [], tz, config, sets or [], run)
    for i, (one, findings) in enumerate(analysed):
        # several runs in the input: report.html, report.<run 2>.html, ...
        target = (
            output
            if i == 0
            else output.with_name(f"{output.stem}.{file_stem(run_name(one, i))}{output.suffix}")
        )
        built = build_report(one, findings, figures=not no_figures)
        written = write_report(built, target, kind)
        s = built.summary
        typer.echo(
            f"wrote {written[0]}: {s.records:,} records, {len(findings)} finding(s), "
            f"{len(built.remedies)} remedy(ies), {len(built.figures)} figure(s)"
        )
        for extra in written[1:]:
            typer.echo(f"wrote {extra}")


def report_kind(output: Path) -> str:
    """``html`` or ``md``, from the output's name; any other suffix is a usage error."""
    from logbook.errors import UsageError

    kind = REPORT_SUFFIXES.get(output.suffix.lower())
    if kind is None:
        raise UsageError(
            f"output {output}: a report is .html (or .htm) or .md (or .markdown), "
            f"not {output.suffix or 'a name without a suffix'!r}"
        )
    return kind


def _analyse(
    logs: list[Path],
    log_format: str | None,
    notes: list[Path],
    tz: str,
    config: Path | None,
    sets: list[str],
    only: str | None = None,
):
    """Read the runs (with their chronicle notes) and run the detectors on each."""
    from logbook.detectors import detect
    from logbook.detectors._config import build_config, read_config_file

    tables = read_config_file(config) if config is not None else None
    cfg = build_config(tables, sets)
    out = []
    for run in load_runs(list(logs), log_format, tz, only):
        if notes:
            from parsers.chronicle.notes import attach_notes

            run = attach_notes(run, list(notes), tz)
        out.append((run, detect(run, cfg)))
    return out
