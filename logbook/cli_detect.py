"""``logbook detect``: what went wrong in a run, when, and what warned of it first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from logbook.cli_runs import RunOpt, load_runs, run_name
from logbook.schema import Finding

LogArgs = Annotated[
    list[Path] | None, typer.Argument(help="Log files of one run (raw, generic JSONL or logbook).")
]
FAIL_LEVELS = ("warning", "critical")
REQUIRED_KEYS = (
    "kind",
    "detector",
    "severity",
    "step",
    "start_step",
    "end_step",
    "score",
    "message",
)
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
    config: Annotated[
        Path | None, typer.Option("--config", help="Thresholds file (TOML, or JSON if .json).")
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one threshold: detector.field=value (repeatable)."),
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", "-f", help="Log format; sniffed when not given.")
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", help="Print the detectors, their thresholds and exit.")
    ] = False,
    run: RunOpt = None,
) -> None:
    """Detect spikes, non-finite values, loss-scale collapses, drifts, LR changes,
    divergence, stalls, slowdowns and restarts, with their precursors."""
    from logbook.errors import UsageError

    if list_:
        from logbook.detectors._docs import render

        typer.echo(render(), nl=False)
        return
    if fail_on is not None and fail_on not in FAIL_LEVELS:
        raise UsageError(f"--fail-on {fail_on!r}: use warning or critical")
    if not logs:
        raise UsageError("no log file given (logbook detect LOG...)")
    cfg = _config(config, sets or [])
    worst = 0
    results = _run(logs, fmt, cfg, run)
    for i, (findings, head, name) in enumerate(results):
        if as_json:
            for f in findings:
                row = finding_json(f)
                if len(results) > 1:
                    row["run"] = row.get("run") or name
                typer.echo(json.dumps(row))
        else:
            typer.echo(("\n" if i else "") + table(findings, head))
        worst = max(worst, _worst(findings))
    if fail_on is not None and worst >= _rank(fail_on):
        raise typer.Exit(1)


def _config(path: Path | None, sets: list[str]) -> dict:
    from logbook.detectors._config import build_config, read_config_file

    tables = read_config_file(path) if path is not None else None
    return build_config(tables, sets)


def _run(
    logs: list[Path], fmt: str | None, cfg: dict, only: str | None = None
) -> list[tuple[list[Finding], str, str]]:
    """(findings, headline, run name) for every run in the logs."""
    size = sum(p.stat().st_size for p in logs if p.is_file())
    if size >= PROGRESS_BYTES and sys.stderr.isatty():
        typer.echo(f"reading {len(logs)} file(s), {size / 1e6:,.0f} MB ...", err=True)
    runs = load_runs(list(logs), fmt, run=only)
    return [(_detect(r, cfg), _headline(r), run_name(r, i)) for i, r in enumerate(runs)]


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


def finding_json(f: Finding) -> dict[str, Any]:
    """The JSON object of one finding: the required keys always, the others when set."""
    data = f.model_dump(mode="json")
    out = {k: data.get(k) for k in REQUIRED_KEYS}
    for k, v in data.items():
        if k not in out and v not in (None, {}, []):
            out[k] = v
    return out


def _rank(severity: str) -> int:
    from logbook.detectors import SEVERITY_RANK

    return SEVERITY_RANK[severity]


def _worst(findings: list[Finding]) -> int:
    return max((_rank(f.severity) for f in findings), default=-1)


def table(findings: list[Finding], head: str = "") -> str:
    """A plain-text table of findings, one per line, then a count by severity."""
    lines = [head] if head else []
    if not findings:
        return "\n".join([*lines, "no findings"])
    rows = [("SEVERITY", "KIND", "STEP", "START..END", "SCORE", "WHAT")]
    for f in findings:
        what = f.message
        if f.precedes:
            what += f" [precursor of {f.precedes}, {f.lead_steps} steps ahead]"
        span = f"{_s(f.start_step)}..{_s(f.end_step)}"
        score = "" if f.score is None else f"{f.score:.3g}"
        rows.append((f.severity, f.kind, _s(f.step), span, score, what))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5]
        )
    counts = {
        s: sum(1 for f in findings if f.severity == s) for s in ("critical", "warning", "info")
    }
    lines.append(f"{len(findings)} finding(s): " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


def _s(v: int | None) -> str:
    return "-" if v is None else str(v)
