"""Each run's headline figures, and the plain-text table the terminal gets."""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from logbook.run import Run
from logbook.schema import Finding

SEVERITIES = ("critical", "warning", "info")
HEADERS = ("run", "format", "records", "first step", "last step", "final loss", "min loss",
           "critical", "warning", "info", "restarts")  # fmt: skip
NUMERIC = {h for h in HEADERS if h not in ("run", "format")}  # right-aligned


@dataclass(frozen=True)
class Headline:
    """One run at a glance. The losses are those of its trajectory: ``final_loss`` the
    last record's (NaN where the run ended non-finite), ``min_loss`` the lowest finite."""

    name: str
    format: str
    records: int
    first_step: int | None
    last_step: int | None
    final_loss: float | None
    min_loss: float | None
    findings: dict[str, int]  # by severity, every severity present
    restarts: int


def headline(run: Run, name: str, findings: list[Finding]) -> Headline:
    """The headline figures of ``run`` given its findings."""
    traj = run.trajectory()
    steps = traj.get_column("step")
    loss = traj.get_column("loss").drop_nulls() if "loss" in traj.columns else pl.Series([])
    finite = loss.filter(loss.is_finite()) if loss.len() else loss
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    return Headline(
        name=name,
        format=run.meta.format or "unknown",
        records=run.metrics.height,
        first_step=steps.min() if traj.height else None,
        last_step=steps.max() if traj.height else None,
        final_loss=float(loss[-1]) if loss.len() else None,
        min_loss=float(finite.min()) if finite.len() else None,
        findings=counts,
        restarts=len(run.events_of("restart")),
    )


def loss_text(v: float | None) -> str:
    if v is None:
        return "-"
    return "nan" if math.isnan(v) else f"{v:.4g}"


def printable(text: str) -> str:
    """``text`` with control characters (a log's escape codes) shown as ``?``."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def cells(h: Headline) -> list[str]:
    """The headline as the table's row of texts."""
    step = [str(s) if s is not None else "-" for s in (h.first_step, h.last_step)]
    losses = [loss_text(h.final_loss), loss_text(h.min_loss)]
    counts = [str(h.findings[s]) for s in SEVERITIES]
    return [printable(h.name), printable(h.format), f"{h.records:,}", *step, *losses, *counts,
            str(h.restarts)]  # fmt: skip


def terminal_table(heads: list[Headline]) -> str:
    """The runs' headline figures as aligned plain-text columns, one run a line."""
    rows = [list(HEADERS), *(cells(h) for h in heads)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = []
    for row in rows:
        parts = [
            c.rjust(w) if h in NUMERIC else c.ljust(w)
            for c, w, h in zip(row, widths, HEADERS, strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
