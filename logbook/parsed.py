"""What a format parser returns for one file, before runs are stitched together."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from logbook.schema import EventBase


@dataclass(eq=False)
class Parsed:
    """One file's records and events.

    ``metrics`` holds canonical columns plus ``line`` (1-based physical line of the
    record's first line) and no ``segment``: segments are assigned when files are
    stitched. ``events`` carry ``source.line``. Launch evidence (a checkpoint load, a
    start-up banner) is given as ``restart`` events; crash evidence as
    ``hardware_failure`` events: stitching turns them into segments and causes.

    Every physical line is accounted for: it is part of a record or an event, counted
    in ``ignored`` (blank lines, collector comments, known framework noise), or listed
    in ``unrecognized``.
    """

    metrics: pl.DataFrame
    events: list[EventBase] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    unrecognized: pl.Series = field(default_factory=lambda: pl.Series("line", [], pl.Int64))
    ignored: int = 0
