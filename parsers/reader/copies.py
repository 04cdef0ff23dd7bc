"""Per-rank copies of one record: every rank prints the same step, most with the same
loss and only throughput jittering. Kept once, counted as ignored lines with a caveat
(a step printed again later, after a rewind, is not a copy: the copies are adjacent)."""

from __future__ import annotations

import numpy as np
import polars as pl

from logbook.parsed import Parsed

_LAUNCH = ("restart", "hardware_failure")


def drop_rank_copies(parsed: Parsed) -> Parsed:
    """``parsed`` without the records that repeat the step and loss of the record
    before them (within a run of records of that step)."""
    m = parsed.metrics
    if m.height < 2 or "step" not in m.columns or "loss" not in m.columns:
        return parsed
    step = m.get_column("step")
    if step.null_count() == m.height or not (step.slice(1) == step.slice(0, m.height - 1)).any():
        return parsed  # no step follows itself: nothing to compare (the common case)
    # launches and crashes between two records make them records of different launches
    marks = np.sort(
        np.array(
            [
                e.source.line
                for e in parsed.events
                if e.kind in _LAUNCH and e.source and e.source.line
            ],
            dtype=np.int64,
        )
    )
    launch = np.searchsorted(marks, m.get_column("line").to_numpy(), side="left")
    m2 = m.with_columns(pl.Series("_launch", launch, pl.Int64))
    new = (pl.col("step") != pl.col("step").shift(1)) | (
        pl.col("_launch") != pl.col("_launch").shift(1)
    )
    run = new.fill_null(True).cum_sum()
    loss = pl.col("loss").cast(pl.Float64)
    key = pl.struct(run.alias("r"), loss.fill_nan(None).alias("l"), loss.is_nan().alias("n"))
    keep = key.is_first_distinct() | pl.col("step").is_null() | pl.col("loss").is_null()
    kept = m2.filter(keep).drop("_launch")
    dropped = m.height - kept.height
    if dropped == 0:
        return parsed
    meta = dict(parsed.meta)
    meta["caveats"] = [*meta.get("caveats", []), f"{dropped} per-rank copies of records dropped"]
    meta["rank_copies"] = meta.get("rank_copies", 0) + dropped
    return Parsed(
        metrics=kept,
        events=parsed.events,
        meta=meta,
        unrecognized=parsed.unrecognized,
        ignored=parsed.ignored + dropped,
    )
