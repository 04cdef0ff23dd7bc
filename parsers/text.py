"""Any text log whose lines repeat a step-and-metrics shape, in no known layout.

Read by the tolerant reader (:mod:`parsers.reader`) with the common key aliases only;
the run's metadata says which printed key became which column (a caveat), so that a
guess can be checked. Other formats score higher when they recognize their own lines.
"""

from __future__ import annotations

import dataclasses
import re

import polars as pl

from logbook.blocks import LineBlocks
from logbook.parsed import Parsed
from parsers import reader
from parsers.reader import events

NAME = "text"
DESCRIPTION = "any log of repeated step-and-metrics lines (key: value, key=value, dicts)"
EXAMPLE = "step 120 | loss 2.3456 | lr 3.0e-04 | grad_norm 0.91 | 412.5ms"
MAPS = (
    "keys through the common alias table (step/iter/iteration/global_step->step, loss/"
    "train_loss/lm loss->loss, lr/learning_rate->lr, grad_norm/gnorm->grad_norm, time->"
    "step_time_s, ...); other keys kept in snake_case; units (ms, s, %, k) applied"
)
SNIFF_MAX = 20
STREAMS = True  # each line read on its own: a large file is read in blocks


# A log that prints no loss at all (accuracy and speed only, a benchmark's throughput
# lines): a step and any named value make its records.
NO_LOSS = reader.Spec(any_value=True)


def sniff(head: list[str]) -> int:
    """20 with two or more records of a repeated shape, 10 with one, 5 with two or more
    records of a step and named values but no loss or behind comment marks (a log
    pasted into a script), 1 with no record but crash evidence (a job that died before
    its first record: its log is read for the crash) or two fp16 overflow messages."""
    n = reader.sniff_records(head)
    if n:
        return 20 if n >= 2 else 10
    if reader.sniff_records(head, NO_LOSS) >= 2:
        return 5
    if _commented(head) and reader.sniff_records(_uncommented(head)) >= 2:
        return 5
    if sum(1 for line in head if _OVERFLOW.search(line)) >= 2:
        return 1  # fp16 overflow messages only (``parsers.reader.overflows``)
    return 1 if any(_CRASH.search(line) for line in head) else 0


def _series(metrics: pl.DataFrame) -> bool:
    """Records of a log without a loss that make a series: three or more, their steps
    going forward (numbers of any other lines, a traceback's ``line 8``, go any way)."""
    if metrics.height < 3 or "step" not in metrics.columns:
        return False
    steps = metrics.get_column("step")
    return steps.null_count() == 0 and bool((steps.diff().drop_nulls() > 0).all())


def _one_shape(parsed: Parsed) -> Parsed:
    """A log without a loss read from its steps and values: its records are the lines
    of the one set of values that most of them print (Sockeye's ``Epoch[1] Batch [50]
    ... perplexity=``); a line with other values (a checkpoint's summary, ``GPU 1:
    8599/11171 MB``) is unrecognized, not a record."""
    m = parsed.metrics
    values = [c for c in m.columns if c not in ("line", "step", "time", "epoch")]
    if m.height < 3 or not values:
        return parsed
    present = m.select(
        pl.concat_str([pl.col(c).is_not_null().cast(pl.Int8).cast(pl.String) for c in values])
    ).to_series()
    counts = present.value_counts(sort=True)
    top, n = counts.row(0)
    if n == m.height or n < 3 or n < 0.6 * m.height:
        return parsed
    keep = present == top
    dropped = m.filter(~keep).get_column("line")
    unrecognized = pl.concat([parsed.unrecognized, dropped.cast(pl.Int64)]).unique().sort()
    metrics = m.filter(keep)
    metrics = metrics.select(
        c
        for c in metrics.columns
        if metrics.get_column(c).null_count() < metrics.height or c in ("line", "step", "time")
    )
    told = parsed.meta.get("columns_from", {})
    meta = {**parsed.meta, "columns_from": {c: k for c, k in told.items() if c in metrics.columns}}
    return dataclasses.replace(parsed, metrics=metrics, unrecognized=unrecognized, meta=meta)


def _all_events(parsed: Parsed) -> bool:
    """Whether every record of a log without a loss stands on a line read as an event
    (a progress bar with an engine's ``OVERFLOW! ... Attempted loss scale: ...`` glued
    on: its numbers are the event's, not a record's)."""
    told = {e.source.line for e in parsed.events if e.source is not None}
    lines = parsed.metrics.get_column("line").to_list()
    return bool(lines) and all(x in told for x in lines)


# A log pasted into a script or a config as comments: every line behind ``# ``.
_COMMENT_MARK = r"^#[ \t]?"
_COMMENTED = 0.8  # share of the non-blank lines that must be comments


def _commented(head: list[str]) -> bool:
    lines = [h for h in head if h.strip()]
    marked = sum(h.startswith("#") for h in lines)
    return len(lines) >= 3 and marked >= _COMMENTED * len(lines)


def _uncommented(head: list[str]) -> list[str]:
    return [re.sub(_COMMENT_MARK, "", h) for h in head]


def _without_marks(lines: pl.DataFrame) -> pl.DataFrame:
    return lines.with_columns(pl.col("text").str.replace(_COMMENT_MARK, ""))


def _head(lines: pl.DataFrame | LineBlocks, n: int = 5000) -> list[str]:
    """The first lines' texts (of the first blocks of a file read in blocks)."""
    if not isinstance(lines, LineBlocks):
        return lines.get_column("text").head(n).to_list()
    out: list[str] = []
    for block in lines:
        out += block.get_column("text").head(n - len(out)).to_list()
        if len(out) >= n:
            break
    return out


_CRASH = re.compile(f"{events.TRACEBACK_START}|{events.CRASH_ANY}")
_OVERFLOW = re.compile(events.OVERFLOW)


def parse(lines: pl.DataFrame | LineBlocks, name: str) -> Parsed:
    parsed = reader.read(lines, name)
    if "loss" not in parsed.metrics.columns and _all_events(parsed):
        # (an engine's message glued onto a bar: its ``loss scale`` is no loss)
        meta = {**parsed.meta, "columns_from": {}}
        parsed = dataclasses.replace(parsed, metrics=parsed.metrics.head(0), meta=meta)
    if not parsed.metrics.height and _commented(_head(lines)):
        bare = (
            lines.transformed(_without_marks)
            if isinstance(lines, LineBlocks)
            else _without_marks(lines)
        )
        again = reader.read(bare, name)
        if again.metrics.height:
            parsed = again
            parsed.meta.setdefault("caveats", []).append(
                "a log in comments: each line's leading '#' taken off"
            )
    if not parsed.metrics.height:
        again = _one_shape(reader.read(lines, name, NO_LOSS))
        if _series(again.metrics) and not _all_events(again):
            parsed = again
            parsed.meta.setdefault("caveats", []).append(
                "no loss in this log: a record is a step with the other values it prints"
            )
    mapping = parsed.meta.get("columns_from", {})
    if mapping:
        told = ", ".join(f"{k!s}->{c}" for c, k in mapping.items())
        parsed.meta.setdefault("caveats", []).append(f"read as generic text: {told}")
    return parsed
