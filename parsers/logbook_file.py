"""logbook's own JSONL (and Parquet) files: a run as ``logbook parse`` wrote it."""

from __future__ import annotations

import polars as pl

from logbook.parsed import Parsed
from logbook.run import run_from_lines

NAME = "logbook"
DESCRIPTION = "logbook JSONL/Parquet written by `logbook parse` or `logbook replay`"
EXAMPLE = '{"type": "run", "schema": "logbook/1", ...}'
MAPS = "read as written (schema logbook/1)"


SNIFF_MAX = 100  # the highest score sniff gives


def sniff(head: list[str]) -> int:
    first = next((h for h in head if h.strip()), "")
    compact = first.replace(" ", "")
    return 100 if compact.startswith('{"type":"run","schema":"logbook/') else 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    """Not used by ``read_log`` (which reads these files whole); kept for uniformity."""
    run = run_from_lines(lines, name)
    return Parsed(metrics=run.metrics.drop("segment", "source"), events=run.events)
