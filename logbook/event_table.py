"""Events as a table: one row per event, the fields every event has as columns and the
fields of its kind as JSON, so that one frame holds restarts, LR changes and crashes."""

from __future__ import annotations

import json
from collections.abc import Iterable

import polars as pl

from logbook.schema import EventBase

# the fields of EventBase that become columns (the rest of a kind's fields: ``detail``)
COMMON = ("kind", "step", "segment", "time", "run", "text", "step_source")
SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String(),
    "step": pl.Int64(),
    "segment": pl.Int64(),
    "time": pl.Datetime("us", "UTC"),
    "run": pl.String(),
    "file": pl.String(),
    "line": pl.Int64(),
    "text": pl.String(),
    "step_source": pl.String(),
    "detail": pl.String(),
}


def events_frame(events: Iterable[EventBase]) -> pl.DataFrame:
    """``events`` as a frame of :data:`SCHEMA`, in the order given."""
    rows = []
    for e in events:
        own = e.model_dump(mode="json", exclude_none=True, exclude={*COMMON, "source"})
        rows.append(
            {
                **{c: getattr(e, c) for c in COMMON},
                "file": e.source.file if e.source else None,
                "line": e.source.line if e.source else None,
                "detail": json.dumps(own, sort_keys=True),
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)
