"""``restarts``: the job's relaunches and its fp16 overflow skips, from the parsers' events.

Reports every ``restart`` event as a finding with the steps recomputed (``lost_steps``),
the wall time without training (``gap_s``) and the wall time lost in all
(``lost_time_s``: the gap plus the recomputed steps at the median step time), and the
crash evidence seen before it. Severity: warning when crash evidence (``cause``) was
seen, info otherwise (a deliberate stop and resume).

Overflow-skipped iterations (the ``skipped`` column and ``overflow_skip`` events) at most
``merge_steps`` apart make one ``overflow_skip`` finding (info) with their count: the
scaler's ordinary work, listed so that a reader can relate them to a collapse.

Stays quiet on: runs of one segment without skips.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from logbook.detectors._base import Detector, DetectorConfig, finding
from logbook.detectors._frame import Context
from logbook.schema import Finding, OverflowSkip, Restart

NAME = "restarts"


class Config(DetectorConfig):
    """Restart and overflow-skip reporting."""

    merge_steps: int = Field(
        100, ge=0, description="Overflow skips at most this many steps apart are one finding."
    )
    overflow_skips: bool = Field(True, description="Report overflow skips.")


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    restarts = [e for e in ctx.events if isinstance(e, Restart)]
    step_time = _median_step_time(ctx) if restarts else None
    out = [_restart(e, step_time) for e in restarts]
    if cfg.overflow_skips:
        out += _overflow(ctx, cfg)
    return out


def _median_step_time(ctx: Context) -> float | None:
    if "step_time_s" in ctx.columns:
        col = ctx.column("step_time_s")
        v = col.filter(col.is_finite()).median()
        if v is not None:
            return float(v)
    return None


def _restart(e: Restart, step_time: float | None) -> Finding:
    gap = e.gap_s if e.gap_s is not None and e.gap_s >= 0 else None  # < 0: clocks disagree
    lost_time = None
    if gap is not None or (e.lost_steps and step_time):
        lost_time = (gap or 0.0) + (e.lost_steps or 0) * (step_time or 0.0)
    parts = [f"restart at step {e.step}" if e.step is not None else "restart (no record after it)"]
    if e.resume_step is not None:
        parts.append(f"resumed after step {e.resume_step}")
    if e.last_step_before is not None:
        parts.append(f"last step before {e.last_step_before}")
    if e.lost_steps:
        parts.append(f"{e.lost_steps} steps recomputed")
    if lost_time is not None:
        parts.append(f"{_duration(lost_time)} of wall time lost")
    if e.cause:
        parts.append(f"cause: {e.cause}")
    start = e.resume_step + 1 if e.resume_step is not None else e.step
    if start is not None and e.step is not None and start > e.step:
        start = e.step  # resumed at the step itself (a note "restarted from 12000")
    return finding(
        "restart",
        NAME,
        "warning" if e.cause else "info",
        step=e.step,
        start_step=start,
        end_step=e.step,
        score=float(e.lost_steps) if e.lost_steps is not None else None,
        message=", ".join(parts),
        segment=e.segment,
        evidence={
            "resume_step": e.resume_step,
            "last_step_before": e.last_step_before,
            "lost_steps": e.lost_steps,
            "gap_s": e.gap_s,
            "lost_time_s": lost_time,
            "cause": e.cause,
        },
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def _overflow(ctx: Context, cfg: Config) -> list[Finding]:
    m = ctx.run.metrics.filter(pl.col("step").is_not_null())
    parts = []
    if "skipped" in m.columns:
        parts.append(
            m.filter(pl.col("skipped") > 0).select("segment", "step", pl.col("skipped").alias("n"))
        )
    ev = [e for e in ctx.events if isinstance(e, OverflowSkip) and e.step is not None]
    if ev:
        parts.append(
            pl.DataFrame(
                {
                    "segment": [e.segment for e in ev],
                    "step": [e.step for e in ev],
                    "n": [e.count for e in ev],
                },
                schema={"segment": pl.Int32, "step": pl.Int64, "n": pl.Int64},
            )
        )
    if not parts:
        return []
    d = pl.concat(
        [
            p.with_columns(pl.col("segment").cast(pl.Int32), pl.col("n").cast(pl.Int64))
            for p in parts
        ]
    )
    # a record's counter and the messages of the same iterations are the same skips
    d = d.group_by(["segment", "step"]).agg(pl.col("n").max()).sort(["segment", "step"])
    new = (pl.col("segment") != pl.col("segment").shift(1)) | (
        pl.col("step").diff() > cfg.merge_steps
    )
    d = d.with_columns(new.fill_null(True).cast(pl.Int64).cum_sum().alias("_ep"))
    eps = d.group_by("_ep", maintain_order=True).agg(
        pl.col("segment").first(),
        pl.col("step").first().alias("start"),
        pl.col("step").last().alias("end"),
        pl.col("n").sum().alias("count"),
    )
    return [
        finding(
            "overflow_skip",
            NAME,
            "info",
            step=r["start"],
            start_step=r["start"],
            end_step=r["end"],
            score=float(r["count"]),
            message=(
                f"{r['count']} iteration(s) skipped on fp16 overflow, "
                f"steps {r['start']}..{r['end']}"
            ),
            segment=r["segment"],
            evidence={"count": r["count"]},
        )
        for r in eps.iter_rows(named=True)
    ]


DETECTOR = Detector(
    name=NAME, config=Config, fn=detect, kinds=("restart", "overflow_skip"), doc=__doc__ or ""
)
