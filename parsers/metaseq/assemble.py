"""Put a metaseq/fairseq file together: records, events, ignored and unrecognized lines.

The format module finds its records (and its validation results); everything else is
classified here (see ``parsers.metaseq.lines``), so that every physical line ends up
exactly once as a record, an event, ignored, or unrecognized.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase
from parsers.columns import python_time, with_core
from parsers.metaseq import lines as ml
from parsers.metaseq.columns import units
from parsers.metaseq.events import EventReader, Records

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass
class Found:
    """What a format found by itself. Line numbers are 1-based."""

    metrics: pl.DataFrame  # typed columns, with ``line`` and ``time``
    events: list[EventBase] = field(default_factory=list)  # validation results
    event_lines: np.ndarray = field(default_factory=lambda: _EMPTY)  # their lines
    ignored_lines: np.ndarray = field(default_factory=lambda: _EMPTY)  # summaries
    bad_lines: np.ndarray = field(default_factory=lambda: _EMPTY)  # unreadable records
    wrap_lines: np.ndarray = field(default_factory=lambda: _EMPTY)  # records' later lines
    caveats: list[str] = field(default_factory=list)


def _column(df: pl.DataFrame, name: str) -> np.ndarray:
    if name not in df.columns:
        return np.full(df.height, np.nan)
    return df.get_column(name).cast(pl.Float64).fill_null(np.nan).to_numpy()


def assemble(
    lines: pl.DataFrame, name: str, found: Found, classes: np.ndarray | None = None
) -> Parsed:
    """The parsed file. ``classes``: line classes found beforehand (``ml.classify`` of
    some lines, -1 for the others), used where they cover a line left to classify."""
    n = lines.height
    code = np.full(n, -1, dtype=np.int8)
    metrics = with_core(found.metrics).sort("line", maintain_order=True)
    rec_lines = metrics.get_column("line").to_numpy()
    code[rec_lines - 1] = ml.RECORD
    code[found.wrap_lines - 1] = ml.RECORD
    code[found.event_lines - 1] = ml.EVENT
    code[found.ignored_lines - 1] = ml.NOISE
    code[found.bad_lines - 1] = ml.UNKNOWN
    rest = np.flatnonzero(code == -1)
    rest_lines = lines[rest]
    known = classes[rest] if classes is not None else np.full(rest.size, -1, dtype=np.int8)
    todo = np.flatnonzero(known == -1)
    if todo.size:
        known[todo] = ml.classify(rest_lines.get_column("text").gather(todo))
    code[rest] = known
    code = ml.settle_continuations(code)

    is_event = code[rest] == ml.EVENT
    event_rows = rest_lines.filter(pl.Series(is_event)).with_columns(ml.timestamps(pl.col("text")))
    records = Records(rec_lines, _column(metrics, "step"), _column(metrics, "loss_scale"))
    reader = EventReader(name, records)
    events = list(found.events)
    rows = event_rows.select("line", "text", python_time())
    for line, text, time in rows.iter_rows():
        events += reader.read(line, text, time)
    events += reader.finish()
    events.sort(key=lambda e: e.source.line if e.source and e.source.line else 0)
    # event lines that gave no event of their own (a crash's other lines, the loss
    # scaler's banner) are counted as ignored
    told = {e.source.line for e in events if e.source}
    silent = sum(1 for line in event_rows.get_column("line").to_list() if line not in told)

    quiet = (code == ml.BLANK) | (code == ml.COMMENT) | (code == ml.NOISE)
    unknown = np.flatnonzero(code == ml.UNKNOWN) + 1
    meta: dict = {"units": units(metrics)} if units(metrics) else {}
    if found.caveats:
        meta["caveats"] = found.caveats
    if found.wrap_lines.size:  # lines that belong to a record without being its first
        meta["continued_lines"] = int(found.wrap_lines.size)
    return Parsed(
        metrics=metrics,
        events=events,
        meta=meta,
        unrecognized=pl.Series("line", unknown, dtype=pl.Int64),
        ignored=int(quiet.sum()) + silent,
    )
