"""Overflows a record shows only through its loss scale.

Megatron's dynamic scaler lowers the scale only when a step overflows, so a record whose
scale is k powers of two below the record before it stands for at least k skipped
iterations in its interval. Read that way only where the record does not print its own
skipped counter (an old release, or a line cut before the counter).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from logbook.schema import EventBase, OverflowSkip, Source

TEXT_MAX = 300


def scale_fall_events(recs: pl.DataFrame, events: list[EventBase], name: str) -> list[OverflowSkip]:
    """One ``overflow_skip`` per record (``step``, ``line``, ``text``, ``loss_scale``,
    ``skipped``, ``time`` where known) whose scale fell since the record before, that has
    no skipped counter, and whose interval no overflow event already covers."""
    if "loss_scale" not in recs.columns or recs.height < 2:
        return []
    skipped = (
        recs.get_column("skipped").is_null().to_numpy()
        if "skipped" in recs.columns
        else np.ones(recs.height, dtype=bool)
    )
    scale = recs.get_column("loss_scale").cast(pl.Float64).fill_null(np.nan).to_numpy()
    step = recs.get_column("step").fill_null(-1).to_numpy()
    ok = np.flatnonzero(np.isfinite(scale) & (scale > 0) & (step >= 0))
    if ok.size < 2:
        return []
    prev, cur = ok[:-1], ok[1:]
    fell = (scale[cur] < scale[prev]) & (step[cur] > step[prev]) & skipped[cur]
    if not fell.any():
        return []
    told = np.array(
        sorted(e.step for e in events if isinstance(e, OverflowSkip) and e.step is not None),
        dtype=np.int64,
    )
    lines, texts = recs.get_column("line").to_list(), recs.get_column("text").to_list()
    times = recs.get_column("time").to_list() if "time" in recs.columns else [None] * recs.height
    out = []
    for p, c in zip(prev[fell], cur[fell], strict=True):
        lo, hi = np.searchsorted(told, [step[p] + 1, step[c] + 1])
        if hi > lo:  # an overflow message of that interval says it already
            continue
        halvings = max(1, round(float(np.log2(scale[p] / scale[c]))))
        out.append(
            OverflowSkip(
                step=int(step[c]),
                count=min(halvings, int(step[c] - step[p])),
                attempted_scale=float(scale[p]),
                new_scale=float(scale[c]),
                time=times[c],
                source=Source(file=name, line=int(lines[c])),
                step_source="record",
                text=texts[c].strip()[:TEXT_MAX],
            )
        )
    return out
