"""``loss_scale_collapse``: the fp16 dynamic loss scale keeps halving.

A healthy fp16 run saws between two or three powers of two: the scaler doubles the
scale after a quiet stretch and halves it at an overflow. Fires when, within
``window_steps`` (500) steps, the scale has fallen ``min_halvings`` (3) powers of two below
its maximum in that window, or has reached ``min_scale`` (1.0), or the share of
overflow-skipped iterations reaches ``max_skip_rate`` (5%, at least ``min_skips``
iterations). The finding starts at the first halving of the fall, fires at the record
where the rule first holds and ends at its last halving or skip. Severity: critical when the
minimum scale is reached, warning otherwise.

Smaller falls of at least ``precursor_halvings`` (2) are kept as ``loss_scale_drop``
(info) only when they precede a loss spike or a divergence.

Stays quiet on: bf16 runs (no scale, or a scale printed as 1.0 throughout with nothing
skipped), a static scale, single halvings, and the start-up
calibration of a run trained from scratch (its first ``startup_steps`` steps, where the
scaler walks down from 2^32).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from logbook.detectors._base import Detector, DetectorConfig, finding, fmt
from logbook.detectors._frame import Context
from logbook.detectors._robust import runs_of
from logbook.schema import Finding, OverflowSkip

NAME = "loss_scale_collapse"


class Config(DetectorConfig):
    """Loss-scale collapse thresholds."""

    window_steps: int = Field(500, ge=1, description="Steps over which halvings are counted.")
    min_halvings: float = Field(
        3, gt=0, description="Powers of two below the window's maximum that make a collapse."
    )
    min_scale: float = Field(1.0, gt=0, description="Reaching this scale is a collapse.")
    max_skip_rate: float = Field(
        0.05, gt=0, le=1, description="Share of overflow-skipped iterations in the window."
    )
    min_skips: int = Field(5, ge=1, description="Skipped iterations the rate rule needs.")
    startup_steps: int = Field(
        200, ge=0, description="Steps of start-up calibration ignored in a run from scratch."
    )
    precursor_halvings: float = Field(
        2, gt=0, description="Fall (powers of two) kept as a precursor of a spike."
    )


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    if not ctx.has("loss_scale"):
        return []
    df = _prepared(ctx, cfg)
    out = _episodes(df, "collapse", cfg, "loss_scale_collapse")
    taken = pl.col("_run").is_in(
        df.filter(pl.col("collapse")).get_column("_below_run").unique().implode()
    )
    drops = df.with_columns((pl.col("drop_cond") & ~taken).alias("drop_only"))
    out += _episodes(drops, "drop_only", cfg, "loss_scale_drop")
    return out


def _prepared(ctx: Context, cfg: Config) -> pl.DataFrame:
    """The records where the scale changes or iterations were skipped (a few hundred in
    a long run), with the fall from the window's maximum and the skips in the window."""
    step, lineage = ctx.column("step").to_numpy(), ctx.column("lineage").to_numpy()
    scale = ctx.column("loss_scale").cast(pl.Float64).fill_null(np.nan).to_numpy()
    skipped = np.zeros(ctx.height, dtype=np.int64)
    if "skipped" in ctx.columns:
        skipped = ctx.column("skipped").fill_null(0).cast(pl.Int64).to_numpy()
    skipped = np.maximum(skipped, _event_skips(ctx, step, ctx.column("segment").to_numpy()))
    ok = np.isfinite(scale) & (scale > 0)
    if step.size and step[0] <= max(10, ctx.interval):  # trained from scratch: start-up
        ok &= step > cfg.startup_steps
    idx = np.flatnonzero(ok)
    v, lin = scale[idx], lineage[idx]
    change = np.concatenate(([True], (v[1:] != v[:-1]) | (lin[1:] != lin[:-1])))
    kept = idx[change | (skipped[idx] > 0)]
    df = ctx.select(["lineage", "report", "step", "segment", "loss_scale"])[kept]
    df = df.with_columns(pl.Series("skipped", skipped[kept]))
    ls = pl.col("loss_scale")
    window = f"{cfg.window_steps}i"
    l2 = ls.log(2)
    # the level just before each change: the window's maximum must include the level in
    # force when the window opened
    high = pl.max_horizontal(l2, l2.shift(1).over("lineage").fill_null(l2))
    df = df.with_columns(
        (high.rolling_max_by("step", window_size=window).over("lineage") - l2).alias("drop"),
        pl.col("skipped").rolling_sum_by("step", window_size=window).over("lineage").alias("skips"),
    )
    rate = pl.col("skips") / cfg.window_steps
    collapse = (
        (pl.col("drop") >= cfg.min_halvings)
        | ((pl.col("loss_scale") <= cfg.min_scale) & ((pl.col("drop") > 0) | (pl.col("skips") > 0)))
        | ((rate >= cfg.max_skip_rate) & (pl.col("skips") >= cfg.min_skips))
    )
    # a fall lasts while the scale stays below the window's maximum; between two kept
    # records more than a window apart it has expired
    below = pl.col("drop") > 0
    near = (pl.col("step").diff() <= cfg.window_steps).fill_null(False)
    goes_on = below & below.shift(1).fill_null(False) & near
    new_lineage = (pl.col("lineage") != pl.col("lineage").shift(1)).fill_null(True)
    first_skip = pl.when(pl.col("skipped") > 0).then(pl.col("step"))
    df = df.with_columns(
        collapse.alias("collapse"),
        (pl.col("drop") >= cfg.precursor_halvings).alias("drop_cond"),
        (~goes_on | new_lineage).cast(pl.Int64).cum_sum().alias("_below_run"),
        first_skip.rolling_min_by("step", window_size=window).over("lineage").alias("_skip0"),
    )
    fall_onset = pl.col("step").first().over("_below_run")
    onset = pl.when(below).then(fall_onset).otherwise(pl.col("_skip0").fill_null(pl.col("step")))
    return df.with_columns(onset.alias("_onset"), pl.col("_below_run").alias("_run"))


def _event_skips(ctx: Context, step: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Iterations skipped per frame row according to ``overflow_skip`` events."""
    out = np.zeros(step.size, dtype=np.int64)
    ev = [e for e in ctx.events if isinstance(e, OverflowSkip) and e.step is not None]
    if not ev:
        return out
    keys = np.array([(e.segment << 40) + e.step for e in ev], dtype=np.int64)
    counts = np.array([e.count for e in ev], dtype=np.int64)
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=counts).astype(np.int64)
    rows = (segment.astype(np.int64) << 40) + step
    pos = np.minimum(np.searchsorted(uniq, rows), uniq.size - 1)
    hit = uniq[pos] == rows
    out[hit] = sums[pos[hit]]
    return out


def _episodes(df: pl.DataFrame, flag: str, cfg: Config, kind: str) -> list[Finding]:
    d = df.with_columns(runs_of(pl.col(flag)).alias("_ep")).filter(pl.col(flag))
    if d.height == 0:
        return []
    eps = d.group_by(["lineage", "_ep"], maintain_order=True).agg(
        pl.col("_onset").first().alias("start"),
        pl.col("step").first().alias("alarm"),
        pl.col("step").last().alias("end"),
        pl.col("segment").first(),
        pl.col("loss_scale").min().alias("min_scale"),
        pl.col("drop").max().alias("halvings"),
        pl.col("skips").max().alias("skips"),
        pl.col("report").first(),
    )
    eps = eps.filter(pl.col("report"))  # episodes of context rows are reported in lineage 0
    return [_finding(r, cfg, kind) for r in eps.iter_rows(named=True)]


def _finding(r: dict, cfg: Config, kind: str) -> Finding:
    at_min = r["min_scale"] <= cfg.min_scale
    halvings = r["halvings"]
    msg = (
        f"loss scale fell {halvings:.0f} powers of two (to {fmt(r['min_scale'])}) "
        f"from step {r['start']}"
        if halvings > 0
        else f"loss scale at {fmt(r['min_scale'])} from step {r['start']}"
    )
    if at_min:
        msg += "; minimum scale reached"
    if r["skips"]:
        msg += f"; {r['skips']} iterations skipped within {cfg.window_steps} steps"
    if r["lineage"]:
        msg += " (in steps later recomputed after a restart)"
    severity = "info" if kind == "loss_scale_drop" else ("critical" if at_min else "warning")
    return finding(
        kind,
        NAME,
        severity,
        step=r["alarm"],
        start_step=r["start"],
        end_step=r["end"],
        score=float(halvings),
        message=msg,
        segment=r["segment"],
        evidence={
            "halvings": halvings,
            "min_scale": r["min_scale"],
            "skipped": r["skips"],
            "min_scale_reached": at_min,
            "superseded": True if r["lineage"] else None,
            "precursor_only": True if kind == "loss_scale_drop" else None,
        },
    )


DETECTOR = Detector(
    name=NAME,
    config=Config,
    fn=detect,
    kinds=("loss_scale_collapse", "loss_scale_drop"),
    doc=__doc__ or "",
)
