"""A log of fp16 overflow messages and no training record: DeepSpeed's or apex's dynamic
loss scaler printing ``OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536,
reducing to 32768`` step after step, pasted without the lines around it. Each message
is one skipped step, so the messages are the run's steps: numbered 1..N in file order
(no step is printed), each a record with the scale it fell to and its time, each
overflow event at its step. Said in a caveat. Only where the messages are one fall of
the scale, each attempting the scale the one before left: a scale that grew back
between two messages took steps that printed nothing (a thousand, by default), and the
messages are no run of steps (see :func:`_one_fall`)."""

from __future__ import annotations

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import OverflowSkip

MIN_MESSAGES = 2  # one message alone is no sequence of steps


def overflow_records(parsed: Parsed) -> Parsed:
    """``parsed`` with its overflow messages as records, where it has no record and at
    least :data:`MIN_MESSAGES` of them, none with a step; else ``parsed`` unchanged."""
    if parsed.metrics.height:
        return parsed
    skips = [e for e in parsed.events if isinstance(e, OverflowSkip)]
    if len(skips) < MIN_MESSAGES or any(e.step is not None for e in skips):
        return parsed
    if any(e.source is None or not e.source.line for e in skips):
        return parsed
    skips.sort(key=lambda e: e.source.line)
    if not _one_fall(skips):
        return parsed
    metrics = pl.DataFrame(
        {
            "step": pl.int_range(1, len(skips) + 1, eager=True),
            "line": [e.source.line for e in skips],
            "time": pl.Series([e.time for e in skips], dtype=pl.Datetime("us", "UTC")),
            "loss": pl.Series([None] * len(skips), dtype=pl.Float64),
            "loss_scale": pl.Series([e.new_scale for e in skips], dtype=pl.Float64),
            "skipped": pl.Series([e.count for e in skips], dtype=pl.Int64),
        }
    )
    if metrics.get_column("time").null_count() == metrics.height:
        metrics = metrics.drop("time")
    if metrics.get_column("loss_scale").null_count() == metrics.height:
        metrics = metrics.drop("loss_scale")
    steps = {id(e): k for k, e in enumerate(skips, start=1)}
    events = [
        e.model_copy(update={"step": steps[id(e)]}) if id(e) in steps else e for e in parsed.events
    ]
    meta = dict(parsed.meta)
    meta["caveats"] = [
        *meta.get("caveats", []),
        f"no training record: the {len(skips)} overflow messages are read as "
        f"{len(skips)} skipped steps, numbered 1..{len(skips)} in file order "
        "(the log prints no step)",
    ]
    return Parsed(
        metrics=metrics,
        events=events,
        meta=meta,
        unrecognized=parsed.unrecognized,
        ignored=parsed.ignored,
    )


def _one_fall(skips: list[OverflowSkip]) -> bool:
    """Whether each message attempts the scale the one before it left (or kept, at a
    hysteresis message): no step between them could raise it. A message that gives only
    the scale it sets (apex's ``reducing loss scale to 32768.0``) must set a lower one
    than the message before left: the same scale twice means it grew back between."""
    left = None
    for e in skips:
        if e.attempted_scale is not None:
            if left is not None and e.attempted_scale > left:
                return False
            left = e.new_scale if e.new_scale is not None else e.attempted_scale
        elif e.new_scale is not None:
            if left is not None and e.new_scale >= left:
                return False
            left = e.new_scale
        else:
            return False
    return True
