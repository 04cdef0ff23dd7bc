"""The run summary of a report: what was read, how much training it covers, and what the
input cannot show.

Warnings say when a spike could hide in the log itself: records far apart (a spike
between two records is invisible, and Megatron prints the loss averaged over its log
interval), irregular spacing (e.g. TensorBoard's reservoir sampling, which keeps a
random subset of the scalars), records without a loss value, no timestamps, plus every
caveat the parsers recorded (window-averaged losses, filtered NaNs, cut lines, ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from logbook.run import Run
from logbook.schema import Finding

SPARSE_INTERVAL = 10  # steps between records from which spikes may hide between them
IRREGULAR_SHARE = 0.5  # below this share of gaps equal to the usual one, spacing is irregular
MIN_RECORDS_FOR_SPACING = 20


@dataclass
class Summary:
    """The facts at the top of a report."""

    name: str | None
    formats: str | None
    sources: list[str]
    records: int
    first_step: int | None
    last_step: int | None
    trajectory_steps: int  # records that survived the rewinds
    segments: int
    interval: int | None  # usual steps between consecutive records
    samples: int | None
    tokens: int | None
    start: datetime | None
    end: datetime | None
    wall_s: float | None
    units: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)
    findings: dict[str, int] = field(default_factory=dict)
    unrecognized_lines: int = 0


def summarize(run: Run, findings: list[Finding], traj: pl.DataFrame | None = None) -> Summary:
    """The summary of ``run`` and the counts of its events and ``findings`` (``traj``:
    the run's trajectory, when already computed)."""
    m = run.metrics
    traj = run.trajectory() if traj is None else traj
    steps = m.get_column("step").drop_nulls()
    times = m.get_column("time").drop_nulls()
    start = times.min() if times.len() else None
    end = times.max() if times.len() else None
    interval = log_interval(traj)
    summary = Summary(
        name=run.meta.name,
        formats=run.meta.format,
        sources=list(run.meta.sources),
        records=m.height,
        first_step=int(steps.min()) if steps.len() else None,
        last_step=int(steps.max()) if steps.len() else None,
        trajectory_steps=traj.height,
        segments=m.get_column("segment").n_unique() if m.height else 0,
        interval=interval,
        samples=_last(traj, "samples"),
        tokens=_last(traj, "tokens"),
        start=start,
        end=end,
        wall_s=(end - start).total_seconds() if start is not None and end is not None else None,
        units=dict(run.meta.units),
        events=dict(sorted(Counter(e.kind for e in run.events).items())),
        findings={s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES},
        unrecognized_lines=sum(p.unrecognized for p in run.meta.parse),
    )
    summary.warnings = input_warnings(run, traj, interval)
    return summary


SEVERITIES = ("critical", "warning", "info")


def log_interval(traj: pl.DataFrame) -> int | None:
    """The usual step distance between consecutive records of the trajectory."""
    if traj.height < 2:
        return None
    d = traj.get_column("step").diff().drop_nulls()
    d = d.filter(d > 0)
    return int(d.median()) if d.len() else None


def _last(df: pl.DataFrame, column: str) -> int | None:
    if column not in df.columns:
        return None
    v = df.get_column(column).drop_nulls()
    return int(v.max()) if v.len() else None


def input_warnings(run: Run, traj: pl.DataFrame, interval: int | None) -> list[str]:
    """What this input cannot show well, most important first."""
    out: list[str] = []
    if interval is not None and interval >= SPARSE_INTERVAL:
        out.append(
            f"one record every {interval} steps: a spike shorter than that can fall between "
            "records, and a loss printed as an average over the interval (Megatron) dilutes it"
        )
    irregular = _irregular_share(traj)
    if irregular is not None:
        out.append(
            f"irregular step spacing (only {irregular:.0%} of gaps equal the usual one), as "
            "in reservoir-sampled TensorBoard scalars: extremes between records may be missing"
        )
    if "loss" in run.metrics.columns:
        missing = run.metrics.get_column("loss").null_count()
        if missing:
            out.append(
                f"{missing} record(s) without a loss value (NaN steps that the log left out, "
                "or overflow-skipped intervals)"
            )
    else:
        out.append("no loss values in the log: loss spikes and divergence cannot be seen")
    if run.metrics.height and run.metrics.get_column("time").null_count() == run.metrics.height:
        out.append("no timestamps: wall time and goodput are estimated from the step times")
    out += [c for c in run.meta.caveats if c not in out]
    return out


def _irregular_share(traj: pl.DataFrame) -> float | None:
    if traj.height < MIN_RECORDS_FOR_SPACING:
        return None
    d = traj.get_column("step").diff().drop_nulls()
    d = d.filter(d > 0)
    if not d.len():
        return None
    usual = d.mode().sort()[0]
    share = float((d == usual).mean())
    return share if share < IRREGULAR_SHARE else None


def unit_notes(units: dict[str, str]) -> list[str]:
    """Unit conversions as sentences: ``loss: bits -> nats`` -> ``loss converted from
    bits to nats``."""
    out = []
    for col, how in units.items():
        if "->" in how:
            src, _, dst = how.partition("->")
            out.append(f"{col} converted from {src.strip()} to {dst.strip()}")
        else:
            out.append(f"{col}: {how}")
    return out
