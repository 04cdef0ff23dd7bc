"""``stall``: training that stopped making progress: a hang, or a loss frozen in place.

Two rules, per lineage:

- hang: the wall time between two consecutive records of one segment (at most two log
  intervals apart) is at least ``hang_factor`` (20) times what the run's median time per
  step predicts for the steps between them, and at least ``min_hang_s`` (600 s). Needs
  record timestamps.
- frozen: the loss repeats exactly the same value on ``frozen_records`` (20) or more
  consecutive records (nothing is being trained, or the log reprints a stale value).

Severity: warning. The finding spans the stalled records and gives the lost wall time.

Stays quiet on: the gap at a restart (reported by ``restarts``), slow but steady steps
(``throughput_drop``), logs without timestamps (hang rule), a loss that moves.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from logbook.detectors._base import Detector, DetectorConfig, finding
from logbook.detectors._frame import Context
from logbook.detectors.restarts import _duration
from logbook.schema import Finding

NAME = "stall"


class Config(DetectorConfig):
    """Stall thresholds."""

    hang_factor: float = Field(
        20.0, gt=1, description="Record gap, in expected record durations, that is a hang."
    )
    min_hang_s: float = Field(600.0, ge=0, description="Shortest wall-time gap that is a hang.")
    frozen_records: int = Field(
        20, ge=2, description="Consecutive records with an identical loss that are a stall."
    )


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    out = _hangs(ctx, cfg) if ctx.has("time") else []
    return out + (_frozen(ctx, cfg) if ctx.has("loss") else [])


def _hangs(ctx: Context, cfg: Config) -> list[Finding]:
    d = ctx.select(["lineage", "report", "step", "segment", "time"])
    d = d.filter(pl.col("time").is_not_null())
    same = (pl.col("segment") == pl.col("segment").shift(1)).over("lineage")
    dt = (pl.col("time").diff().dt.total_microseconds() / 1e6).over("lineage")
    dstep = pl.col("step").diff().over("lineage")
    d = d.with_columns(dt.alias("dt"), dstep.alias("dstep"), same.alias("same")).filter(
        pl.col("same") & (pl.col("dstep") > 0) & (pl.col("dt") > 0)
    )
    if d.height < 3:
        return []
    per_step = d.select((pl.col("dt") / pl.col("dstep")).median()).item()
    expected = pl.col("dstep") * per_step
    # consecutive records only: across missing records (an excerpt, another pasted run)
    # a long gap is not evidence of a hang
    hits = d.filter(
        pl.col("report")
        & (pl.col("dstep") <= 2 * max(ctx.interval, 1))
        & (pl.col("dt") >= cfg.hang_factor * expected)
        & (pl.col("dt") >= cfg.min_hang_s)
    ).with_columns((pl.col("step") - pl.col("dstep")).alias("before"))
    return [
        finding(
            "stall",
            NAME,
            "warning",
            step=r["step"],
            start_step=r["before"],
            end_step=r["step"],
            score=r["dt"] / (r["dstep"] * per_step),
            message=(
                f"no record for {_duration(r['dt'])} between steps {r['before']} and "
                f"{r['step']} ({r['dt'] / (r['dstep'] * per_step):.0f}x the usual time)"
            ),
            segment=r["segment"],
            evidence={"rule": "hang", "gap_s": r["dt"], "expected_s": r["dstep"] * per_step},
        )
        for r in hits.iter_rows(named=True)
    ]


def _frozen(ctx: Context, cfg: Config) -> list[Finding]:
    rows = ctx.rows("loss")
    y, lineage = rows.y, rows.lineage
    same = np.zeros(y.size, dtype=bool)  # row i repeats row i - 1
    same[1:] = (y[1:] == y[:-1]) & (lineage[1:] == lineage[:-1])
    nxt = np.concatenate((same[1:], [False]))
    # a frozen stretch: the record before the first repeat, and the repeats
    starts, ends = np.flatnonzero(~same & nxt), np.flatnonzero(same & ~nxt)
    long = ends - starts + 1 >= cfg.frozen_records  # printed values repeat now and then
    out = []
    for a, b in zip(starts[long].tolist(), ends[long].tolist(), strict=True):
        n = b - a + 1
        if not rows.report[a : b + 1].all():
            continue
        start, end, value = int(rows.step[a]), int(rows.step[b]), float(np.exp(y[a]))
        out.append(
            finding(
                "stall",
                NAME,
                "warning",
                step=start,
                start_step=start,
                end_step=end,
                score=float(n),
                message=f"loss frozen at {value:.6g} for {n} records (steps {start}..{end})",
                segment=int(rows.segment[a]),
                evidence={"rule": "frozen", "records": n, "value": value},
            )
        )
    return out


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("stall",), doc=__doc__ or "")
