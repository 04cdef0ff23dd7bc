"""``zero_loss``: the training loss drops to exactly zero and stays there.

A language-model loss printed as ``0.0`` record after record means that nothing was
learned from: every label masked, empty batches after packing, a loss that underflowed
in fp16 (``{'loss': 0.0, 'grad_norm': 0.0, ...}`` on every record). Fires on a stretch
of at least ``min_records`` (3) consecutive records of the trajectory whose loss is
exactly 0 where the loss was not already close to it: the stretch starts at the first
record, or the median of the ``before_records`` (5) records before it is at least
``from_level`` (0.01). Severity: critical when the stretch runs to the last record (the
run never came back), warning otherwise.

Stays quiet on: a loss that falls toward zero (values printed as 0.0 after falling below
``from_level``), the signed losses of reinforcement-learning objectives (a run with a
negative loss anywhere, or a ``reward`` column: a GRPO or PPO loss sits near zero by
construction), a single zero record, missing values.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from logbook.detectors._arrays import runs
from logbook.detectors._base import Detector, DetectorConfig, finding, fmt
from logbook.detectors._frame import Context
from logbook.schema import Finding

NAME = "zero_loss"


class Config(DetectorConfig):
    """Zero-loss thresholds."""

    min_records: int = Field(3, ge=2, description="Consecutive zero-loss records that count.")
    before_records: int = Field(5, ge=1, description="Records before the stretch that judge it.")
    from_level: float = Field(
        0.01, gt=0, description="Median loss before the stretch from which a drop to 0 counts."
    )


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    if not ctx.has("loss") or any(c.startswith("reward") for c in ctx.columns):
        return []
    loss = ctx.column("loss").cast(float).fill_null(np.nan).to_numpy()
    trajectory = ctx.column("lineage").to_numpy() == 0
    loss, idx = loss[trajectory], np.flatnonzero(trajectory)
    known = np.isfinite(loss)
    loss, idx = loss[known], idx[known]
    if loss.size < cfg.min_records or (loss < 0).any():
        return []
    first, last = runs(loss == 0, np.zeros(loss.size, np.int32))
    step = ctx.column("step").to_numpy()[idx]
    segment = ctx.column("segment").to_numpy()[idx]
    out = []
    for i0, i1 in zip(first.tolist(), last.tolist(), strict=True):
        if i1 - i0 + 1 < cfg.min_records:
            continue
        before = loss[max(0, i0 - cfg.before_records) : i0]
        level = float(np.median(before)) if before.size else None
        if level is not None and level < cfg.from_level:
            continue
        out.append(_finding(step, segment, i0, i1, level, i1 == loss.size - 1))
    return out


def _finding(step, segment, i0: int, i1: int, level: float | None, to_end: bool) -> Finding:
    start, end = int(step[i0]), int(step[i1])
    was = f"from {fmt(level)}" if level is not None else "from the first record"
    msg = f"loss exactly 0 {was} at step {start}, for {i1 - i0 + 1} records"
    msg += "; still 0 at the last record" if to_end else f"; back after step {end}"
    return finding(
        "zero_loss",
        NAME,
        "critical" if to_end else "warning",
        step=start,
        start_step=start,
        end_step=end,
        score=float(i1 - i0 + 1),
        message=msg,
        segment=int(segment[i0]),
        evidence={"records": i1 - i0 + 1, "before": level, "to_end": to_end},
    )


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("zero_loss",), doc=__doc__ or "")
