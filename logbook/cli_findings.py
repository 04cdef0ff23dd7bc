"""What ``logbook detect`` shows and keeps: the filters, the incident view, the full
table, and findings written to CSV, Parquet or JSONL.

The default view is one screen: a verdict line, every critical incident and the largest
warning ones (one account line each, see :mod:`logbook.incidents`), then the rest as
counts by kind. ``--all`` prints every finding as a table instead.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from logbook.detectors._base import SEVERITY_RANK
from logbook.errors import UsageError
from logbook.incidents import Incident, first_step, group, last_step
from logbook.schema import Finding

MAX_ROWS = 24  # incident lines of the default view (all critical ones are always shown)
WIDTH = 120  # the width of the view when the output is not a terminal
OUTPUT_SUFFIXES = (".csv", ".parquet", ".jsonl")
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


def finding_json(f: Finding) -> dict[str, Any]:
    """The JSON object of one finding: the required keys always, the others when set."""
    data = f.model_dump(mode="json")
    out = {k: data.get(k) for k in REQUIRED_KEYS}
    for k, v in data.items():
        if k not in out and v not in (None, {}, []):
            out[k] = v
    return out


def parse_steps(text: str | None) -> tuple[int | None, int | None] | None:
    """``A:B``, ``A:`` or ``:B`` as bounds (None: no filter)."""
    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    try:
        bounds = (int(lo) if lo.strip() else None, int(hi) if hi.strip() else None)
    except ValueError:
        bounds = None
    if not sep or bounds is None:
        raise UsageError(f"--steps {text!r}: use A:B, A: or :B (steps, inclusive)")
    return bounds


def select(
    findings: list[Finding],
    min_severity: str | None = None,
    kinds: list[str] | None = None,
    steps: tuple[int | None, int | None] | None = None,
) -> list[Finding]:
    """The findings at or above ``min_severity``, of ``kinds``, overlapping ``steps``."""
    if min_severity is not None and min_severity not in SEVERITY_RANK:
        raise UsageError(f"--min-severity {min_severity!r}: use info, warning or critical")
    wanted = {k.strip() for x in kinds or [] for k in x.split(",") if k.strip()}
    out = []
    for f in findings:
        if min_severity and SEVERITY_RANK[f.severity] < SEVERITY_RANK[min_severity]:
            continue
        if wanted and f.kind not in wanted and f.detector not in wanted:
            continue
        if steps is not None and not _overlaps(f, *steps):
            continue
        out.append(f)
    return out


def _overlaps(f: Finding, lo: int | None, hi: int | None) -> bool:
    a, b = first_step(f), last_step(f)
    if a is None or b is None:
        return lo is None and hi is None
    return (hi is None or a <= hi) and (lo is None or b >= lo)


def width() -> int:
    """The terminal's width, or ``COLUMNS``, or 120 when the output is not a terminal."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((WIDTH, 40)).columns
    return int(os.environ.get("COLUMNS", "0") or 0) or WIDTH


def verdict(findings: list[Finding], incidents: list[Incident], records: int = 1) -> str:
    """One line: how the run went (``records``: the run's records; none, nothing to
    judge a run by unless it shows a crash)."""
    crit = [i for i in incidents if i.severity == "critical"]
    warn = [i for i in incidents if i.severity == "warning"]
    told = {id(g) for i in incidents for g in i.findings}
    n_info = sum(1 for f in findings if f.severity == "info" and id(f) not in told)
    if crit:
        named = "; ".join(
            f"{_kinds(i)} at {_at(i)}" if i.start is not None else f"{_kinds(i)} before any step"
            for i in crit[:3]
        )
        more = f"; {len(crit) - 3} more" if len(crit) > 3 else ""
        head = f"verdict: damaged: {len(crit)} critical incident(s) ({named}{more})"
    elif warn:
        head = f"verdict: worth a look: no critical incident, {len(warn)} warning incident(s)"
    elif records == 0:
        head = "verdict: no records to judge the run by"
    else:
        head = "verdict: healthy: no warning or critical finding"
    return head + (f", {n_info} more info finding(s)" if n_info else "")


def _kinds(inc: Incident) -> str:
    main = [f.kind for f in inc.findings if not f.precedes and f.severity != "info"]
    return "+".join(dict.fromkeys(main)) or "+".join(inc.kinds)


def _at(inc: Incident) -> str:
    if inc.start is None:
        return "-"
    return f"{inc.start}" if inc.end in (None, inc.start) else f"{inc.start}..{inc.end}"


def view(findings: list[Finding], head: str = "", gap: int = 1, records: int = 1) -> str:
    """The default view: verdict, incidents (critical first), the rest counted."""
    lines = [head] if head else []
    incidents = group(findings, gap)
    lines.append(verdict(findings, incidents, records))
    if not findings:
        return "\n".join(lines)
    crit = [i for i in incidents if i.severity == "critical"]
    warn = [i for i in incidents if i.severity == "warning"]
    room = max(0, MAX_ROWS - len(crit))
    shown_warn = sorted(warn, key=lambda i: -_score(i))[:room]
    shown = crit + sorted(shown_warn, key=lambda i: i.start if i.start is not None else -1)
    w = width()
    for inc in shown:
        lead = f"{inc.severity:<8}  {_at(inc):>15}  "
        body = textwrap.wrap(inc.account(), max(20, w - len(lead))) or [""]
        lines.append(_coloured(inc.severity, lead) + body[0])
        keep = 3 if inc.severity == "critical" else 2
        lines += [" " * len(lead) + b for b in body[1:keep]]
        if len(body) > keep:
            lines[-1] = lines[-1][: max(0, w - 4)] + " ..."
    left = [i for i in warn if i not in shown_warn]
    if left:
        kinds = _count(f.kind for i in left for f in i.findings if not f.precedes)
        lines.append(f"... {len(left)} more warning incident(s): {kinds}")
    info = [f for f in findings if f.severity == "info" and not _in_shown(f, shown)]
    if info:
        lines.append(f"info: {_count(f.kind for f in info)}")
    tail = _tally(findings)
    if left or info:
        tail += " (--all lists every one; --min-severity, --kind, --steps filter)"
    lines.append(tail)
    return "\n".join(lines)


COLOURS = {"critical": "red", "warning": "yellow", "info": "bright_black"}


def colour() -> bool:
    """Colour on a terminal, unless ``NO_COLOR`` is set (https://no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _coloured(severity: str, text: str) -> str:
    if not colour():
        return text
    import typer

    return typer.style(text, fg=COLOURS.get(severity), bold=severity == "critical")


def _in_shown(f: Finding, shown: list[Incident]) -> bool:
    return any(f is g for i in shown for g in i.findings)


# incidents that changed the run's course are shown before the largest spikes
COURSE = (
    "crash",
    "restart",
    "divergence",
    "nonfinite",
    "zero_loss",
    "loss_scale_collapse",
    "stall",
)


def _score(inc: Incident) -> float:
    ratios = [f.evidence.get("ratio") for f in inc.findings]
    nums = [float(r) for r in ratios if isinstance(r, int | float)]
    course = any(f.kind in COURSE for f in inc.findings)
    return max(nums, default=0.0) + (1e12 if course else 0.0)


def _count(kinds) -> str:
    counts: dict[str, int] = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


HEADER = ("SEVERITY", "KIND", "STEP", "START..END", "SCORE", "WHAT")


def _rows(findings: list[Finding]) -> list[tuple[str, ...]]:
    rows = []
    for f in findings:
        what = f.message
        if f.precedes:
            what += f" [precursor of {f.precedes}, {f.lead_steps} steps ahead]"
        span = f"{_s(f.start_step)}..{_s(f.end_step)}"
        score = "" if f.score is None else f"{f.score:.3g}"
        rows.append((f.severity, f.kind, _s(f.step), span, score, what))
    return rows


def _tally(findings: list[Finding]) -> str:
    counts = {
        s: sum(1 for f in findings if f.severity == s) for s in ("critical", "warning", "info")
    }
    return f"{len(findings)} finding(s): " + ", ".join(f"{n} {s}" for s, n in counts.items())


def table(findings: list[Finding], head: str = "") -> str:
    """Every finding, one per line (``--all``), then a count by severity.

    On a terminal the table is drawn by ``rich`` to the terminal's width (the WHAT column
    wraps; severities coloured unless ``NO_COLOR`` is set); piped, it is plain text, one
    finding per line, for grep and awk."""
    if findings and sys.stdout.isatty():
        return _rich_table(findings, head)
    lines = [head] if head else []
    if not findings:
        return "\n".join([*lines, "no findings"])
    rows = [HEADER, *_rows(findings)]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5]
        )
    lines.append(_tally(findings))
    return "\n".join(lines)


def _rich_table(findings: list[Finding], head: str) -> str:
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = io.StringIO()
    console = Console(
        file=out,
        width=width(),
        force_terminal=True,
        no_color=bool(os.environ.get("NO_COLOR")),
        highlight=False,
        emoji=False,
        markup=False,
    )
    grid = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name in HEADER[:5]:
        grid.add_column(name, no_wrap=True, justify="right" if name == "SCORE" else "left")
    grid.add_column(HEADER[5], overflow="fold", ratio=1)
    for f, row in zip(findings, _rows(findings), strict=True):
        style = COLOURS.get(f.severity, "") + (" bold" if f.severity == "critical" else "")
        grid.add_row(Text(row[0], style=style.strip()), *row[1:])
    if head:
        console.print(head)
    console.print(grid)
    console.print(_tally(findings))
    return out.getvalue().rstrip("\n")


def _s(v: int | None) -> str:
    return "-" if v is None else str(v)


def check_output(path: Path) -> str:
    """The suffix of a findings file, or a usage error for one logbook cannot write."""
    suffix = path.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise UsageError(f"--output {path}: use a .csv, .parquet or .jsonl file")
    from logbook.atomic import require_folder

    require_folder(path)
    return suffix


def write_findings(rows: list[dict[str, Any]], path: Path) -> None:
    """The findings (``finding_json`` rows, with ``run``) to a CSV, Parquet or JSONL file,
    written to a temp file and renamed."""
    from logbook.atomic import atomic_open

    suffix = check_output(path)
    if suffix == ".jsonl":
        with atomic_open(path, "w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        return
    from logbook.findings import frame_of

    frame = frame_of(rows)
    with atomic_open(path, "wb") as fh:
        if suffix == ".csv":
            frame.write_csv(fh)
        else:
            frame.write_parquet(fh)
