"""Putting runs on one x axis: by step, by tokens consumed, or by wall time since each
run's first record. Each run is drawn along its trajectory (per step, the record of the
last launch that reached it), so that a rewound stretch is not drawn twice."""

from __future__ import annotations

from collections import Counter
from pathlib import PurePath

import polars as pl

from logbook.run import Run

ALIGNS = ("step", "tokens", "time")
AXIS_LABELS = {"step": "step", "tokens": "tokens consumed", "time": "wall time since start"}
# columns that are bookkeeping or running counters, not a metric to overlay
NOT_METRICS = ("step", "segment", "time", "source", "line", "samples", "tokens", "skipped",
               "nan_count", "epoch")  # fmt: skip


def labels_for(runs: list[Run]) -> list[str]:
    """One distinct label per run: its name (``--run`` spelling); where two share one,
    the shortest tail of their source paths that tells them apart
    (``rewind/trainer_state.json``), else ``#1``, ``#2``..."""
    from logbook.cli_runs import run_name

    names = [run_name(r, i) for i, r in enumerate(runs)]
    for depth in range(2, 6):
        counts = Counter(names)
        tails = [_tail(r, depth) for r in runs]
        unique = Counter(tails)
        names = [
            t if counts[n] > 1 and t and unique[t] == 1 else n
            for n, t in zip(names, tails, strict=True)
        ]
    counts = Counter(names)
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        seen[name] += 1
        out.append(name if counts[name] == 1 else f"{name} #{seen[name]}")
    return out


def _tail(run: Run, depth: int) -> str:
    """The last ``depth`` parts of the run's first source path (unnamed runs only)."""
    if run.meta.name or not run.meta.sources:
        return ""
    return "/".join(PurePath(run.meta.sources[0]).parts[-depth:])


def has_axis(run: Run, align: str) -> bool:
    """Whether ``run`` has any value to be aligned by ``align``."""
    if align == "step":
        return True
    return align in run.metrics.columns and run.metrics.get_column(align).null_count() < (
        run.metrics.height
    )


def check_axis(runs: list[Run], labels: list[str], align: str) -> None:
    """A usage error for an unknown ``align`` or a run without its column."""
    from logbook.errors import UsageError

    if align not in ALIGNS:
        raise UsageError(f"--align {align!r}: one of {', '.join(ALIGNS)}")
    for run, label in zip(runs, labels, strict=True):
        if not has_axis(run, align):
            what = "tokens column" if align == "tokens" else "timestamps"
            raise UsageError(f"--align {align}: run {label} has no {what} (try --align step)")


def aligned(run: Run, align: str) -> pl.DataFrame:
    """The run's trajectory with an ``x`` column first: the step, the tokens consumed, or
    seconds since the run's first timestamped record; rows without an ``x`` left out."""
    traj = run.trajectory()
    if align == "step":
        x = pl.col("step").cast(pl.Float64)
    elif align == "tokens":
        x = pl.col("tokens").cast(pl.Float64)
    else:
        start = traj.get_column("time").min()
        x = (pl.col("time") - pl.lit(start)).dt.total_microseconds().cast(pl.Float64) / 1e6
    framed = traj.select(x.alias("x"), pl.all())
    return framed.filter(pl.col("x").is_not_null()).sort("x", maintain_order=True)


def metric_columns(runs: list[Run]) -> list[str]:
    """The metrics to overlay, each that at least one run has a finite value of: the
    report's panels first (loss, lr, grad norm, loss scale, norms), then step time, then
    the others by name."""
    from logbook.report.figures import PANELS

    have: set[str] = set()
    for run in runs:
        m = run.metrics
        for col, dtype in m.schema.items():
            if col in NOT_METRICS or not dtype.is_numeric() or col in have:
                continue
            if m.get_column(col).cast(pl.Float64).is_finite().any():
                have.add(col)
    first = [c for c, _, _ in PANELS] + ["step_time_s"]
    return [c for c in first if c in have] + sorted(have - set(first))
