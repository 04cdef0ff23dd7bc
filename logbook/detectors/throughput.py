"""``throughput_drop``: the time per step rises by a sustained margin.

Reads ``step_time_s`` (or, without it, the wall time between records divided by the
steps between them, within a segment), per sample when ``batch_size`` is logged (a
batch-size ramp-up is not a slowdown). Fires when the median of the last
``short_records`` (10) records is ``min_ratio`` (1.3) times the median of the
``baseline_records`` (200) before them, ``z`` noise deviations above it, for
``min_records`` (10) consecutive records. Severity: warning.

Stays quiet on: the slow first iterations after a launch (the first ``restart_grace``
records of each segment are left out), single slow records (a checkpoint save, an
evaluation), speed-ups, runs without timing, and runs whose format is in
``skip_formats`` (replays of the small model: their step time measures the machine
they were replayed on, not the recorded run).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from logbook.detectors._base import Detector, fmt
from logbook.detectors._frame import Context
from logbook.detectors._trend import TrendConfig, episode_finding, trend_episodes
from logbook.schema import Finding

NAME = "throughput_drop"
DEFAULTS = {
    "column": "step_time_s",
    "short_records": 10,
    "baseline_records": 200,
    "min_records": 10,
    "min_ratio": 1.3,
    "warn_ratio": 1.3,
    "min_noise": 0.01,
}


class Config(TrendConfig):
    """Throughput-drop thresholds."""

    restart_grace: int = Field(3, ge=0, description="Records after a launch left out.")
    per_sample: bool = Field(True, description="Divide by batch_size when it is logged.")
    skip_formats: list[str] = Field(
        ["replay"], description="Run formats whose step time is not watched."
    )


def detect(ctx: Context, cfg: Config):
    if ctx.run.meta.format in cfg.skip_formats:
        return []
    values = _time_per_step(ctx, cfg)
    if values is None:
        return []
    warm = ctx.rows_from(np.zeros(ctx.height)).age >= cfg.restart_grace
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(warm & (values > 0), np.log(np.where(values > 0, values, 1.0)), np.nan)
    eps = trend_episodes(ctx.rows_from(y), cfg)
    return [_finding(r) for r in eps.iter_rows(named=True)]


def _time_per_step(ctx: Context, cfg: Config) -> np.ndarray | None:
    """Seconds per step (per sample), one value per frame row (NaN where unknown)."""
    if ctx.has(cfg.column):
        t = _floats(ctx.column(cfg.column))
    elif ctx.has("time"):
        same = (pl.col("segment") == pl.col("segment").shift(1)).over("lineage")
        dt = (pl.col("time").diff().dt.total_microseconds() / 1e6).over("lineage")
        per_step = pl.when(same).then(dt / pl.col("step").diff().over("lineage"))
        f = ctx.select(["time", "step", "segment", "lineage"])
        t = _floats(f.select(per_step.otherwise(None)).to_series())
    else:
        return None
    if cfg.per_sample and ctx.has("batch_size"):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = t / _floats(ctx.column("batch_size"))
    return t


def _floats(col: pl.Series) -> np.ndarray:
    return col.cast(pl.Float64).fill_null(np.nan).to_numpy()


def _finding(r: dict) -> Finding:
    msg = f"time per step up {r['ratio']:.2f}x from step {r['start']} to {r['end']}"
    evidence = {
        "ratio": r["ratio"],
        "baseline": r["baseline"],
        "peak": r["peak"],
        "note": f"baseline {fmt(r['baseline'])} per step (or per sample)",
    }
    return episode_finding("throughput_drop", NAME, "warning", r, msg, evidence)


DETECTOR = Detector(
    name=NAME,
    config=Config,
    fn=detect,
    kinds=("throughput_drop",),
    doc=__doc__ or "",
    defaults=DEFAULTS,
)
