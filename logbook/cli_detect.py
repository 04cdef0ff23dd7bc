"""``logbook detect``: what went wrong in a run, when, and what warned of it first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from logbook.cli_runs import RunOpt, load_runs, run_name
from logbook.schema import Finding

LogArgs = Annotated[
    list[Path] | None, typer.Argument(help="Log files of one run (raw, generic JSONL or logbook).")
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="Thresholds file (TOML, or JSON if .json).")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override one threshold: detector.field=value (repeatable)."),
]
FAIL_LEVELS = ("warning", "critical")
PROGRESS_RECORDS = 200_000  # show a progress bar on stderr from this many records
PROGRESS_BYTES = 100_000_000  # and say that a large input is being read


def register(app: typer.Typer) -> None:
    """Add the command to the app."""
    app.command("detect")(detect)


def detect(
    logs: LogArgs = None,
    as_json: Annotated[bool, typer.Option("--json", help="One finding per line, as JSON.")] = False,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when a finding of this severity or worse exists: warning|critical.",
        ),
    ] = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    fmt: Annotated[
        str | None, typer.Option("--format", "-f", help="Log format; sniffed when not given.")
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", help="Print the detectors, their thresholds and exit.")
    ] = False,
    run: RunOpt = None,
    min_severity: Annotated[
        str | None,
        typer.Option("--min-severity", help="Only findings of this severity or worse."),
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only findings of this kind or detector (repeatable, a,b)."),
    ] = None,
    steps: Annotated[
        str | None, typer.Option("--steps", help="Only findings overlapping steps A:B (A: or :B).")
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Print every finding, one per line.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Also write the findings to a .csv, .parquet or .jsonl."
        ),
    ] = None,
    notes: Annotated[
        list[Path] | None,
        typer.Option("--notes", help="A team logbook or chronicle placed on the run's steps."),
    ] = None,
    tz: Annotated[
        str,
        typer.Option("--tz", help="Zone for logbook times written without one (UTC, ET, PT)."),
    ] = "UTC",
) -> None:
    """Detect spikes, non-finite values, loss-scale collapses, drifts, LR changes,
    divergence, stalls, slowdowns, crashes and restarts, with their precursors. Prints a
    verdict and the incidents; --all every finding. Filters apply to what is printed,
    written and judged by --fail-on."""
    from logbook.cli_findings import (
        check_output,
        finding_json,
        parse_steps,
        select,
        table,
        view,
        write_findings,
    )
    from logbook.errors import UsageError

    if list_:
        from logbook.detectors._docs import render

        typer.echo(render(), nl=False)
        return
    if fail_on is not None and fail_on not in FAIL_LEVELS:
        raise UsageError(f"--fail-on {fail_on!r}: use warning or critical")
    if not logs:
        raise UsageError("no log file given (logbook detect LOG...)")
    bounds = parse_steps(steps)
    select([], min_severity, kinds, bounds)  # bad filter values fail before the work
    if output is not None:
        check_output(output)
    cfg = _config(config, sets or [])
    worst = -1
    kept: list[dict] = []
    results = _run(logs, fmt, cfg, run, notes or [], tz)
    for i, (found, head, name, gap, records) in enumerate(results):
        findings = select(found, min_severity, kinds, bounds)
        rows = [finding_json(f) for f in findings]
        for row in rows:
            if len(results) > 1:
                row["run"] = row.get("run") or name
        kept += rows
        if as_json:
            _say("\n".join(json.dumps(row) for row in rows), empty=not rows)
        elif show_all:
            _say(("\n" if i else "") + table(findings, head))
        else:
            _say(("\n" if i else "") + view(findings, head, gap, records))
        worst = max(worst, _worst(findings))
    if output is not None:
        write_findings(kept, output)
        if not as_json:
            typer.echo(f"wrote {len(kept)} finding(s) to {output}", err=True)
    if fail_on is not None and worst >= _rank(fail_on):
        raise typer.Exit(1)


def _say(text: str, empty: bool = False) -> None:
    """Print to stdout; a reader that went away (``| head -1``) ends the printing, not
    the command: the verdict of --fail-on is still its exit code."""
    if empty:
        return
    try:
        typer.echo(text)
    except BrokenPipeError:
        from logbook.cli import quiet_stdout

        quiet_stdout()


def _config(path: Path | None, sets: list[str]) -> dict:
    from logbook.detectors._config import build_config, read_config_file

    tables = read_config_file(path) if path is not None else None
    return build_config(tables, sets)


def _run(
    logs: list[Path],
    fmt: str | None,
    cfg: dict,
    only: str | None = None,
    notes: list[Path] | None = None,
    tz: str = "UTC",
) -> list[tuple[list[Finding], str, str, int, int]]:
    """(findings, headline, run name, incident gap, records) for every run in the logs,
    with the chronicle ``notes`` placed on each (their LR changes and rollbacks become
    events the detectors see)."""
    size = sum(p.stat().st_size for p in logs if p.is_file())
    if size >= PROGRESS_BYTES and sys.stderr.isatty():
        typer.echo(f"reading {len(logs)} file(s), {size / 1e6:,.0f} MB ...", err=True)
    runs = load_runs(list(logs), fmt, tz, run=only)
    if notes:
        from parsers.chronicle.notes import attach_notes

        runs = [attach_notes(r, list(notes), tz) for r in runs]
    return [
        (_detect(r, cfg), _headline(r), run_name(r, i), _gap(r), r.metrics.height)
        for i, r in enumerate(runs)
    ]


def _gap(run) -> int:
    """Steps between findings of one incident: a few log intervals."""
    steps = run.metrics.get_column("step").drop_nulls().unique().sort()
    if steps.len() < 2:
        return 1
    return max(1, 3 * int(steps.diff().drop_nulls().median() or 1))


def _detect(run, cfg: dict) -> list[Finding]:
    from logbook.detectors import DETECTORS
    from logbook.detectors import detect as run_detectors

    if run.metrics.height < PROGRESS_RECORDS or not sys.stderr.isatty():
        return run_detectors(run, cfg)
    with typer.progressbar(length=len(DETECTORS), label="detecting", file=sys.stderr) as bar:
        return run_detectors(run, cfg, progress=lambda _name: bar.update(1))


def _headline(run) -> str:
    m = run.metrics
    steps = m.get_column("step").drop_nulls()
    span = f", steps {steps.min()}..{steps.max()}" if steps.len() else ""
    segs = m.get_column("segment").n_unique() if m.height else 0
    name = run.meta.name or ", ".join(Path(x).name for x in run.meta.sources) or None
    what = " ".join(x for x in (name, f"({run.meta.format})" if run.meta.format else None) if x)
    head = f"{what or 'run'}: {m.height:,} records, {segs} segment(s){span}"
    # what the log cannot show (a window-averaged loss, filtered NaNs, a sampled history)
    return "\n".join([head, *(f"note: {c}" for c in run.meta.caveats)])


def _rank(severity: str) -> int:
    from logbook.detectors import SEVERITY_RANK

    return SEVERITY_RANK[severity]


def _worst(findings: list[Finding]) -> int:
    return max((_rank(f.severity) for f in findings), default=-1)
