"""A large file read in blocks, in two passes, in the memory of a few blocks.

The reader's per-line work (cleaning, shapes, values) treats each line on its own; only
the templates need the whole file (every shape, how often it occurs, its first line).
So the first pass keeps, of each block, the counts and first lines of its shapes; the
templates are made from those; the second pass reads each block again, extracts its
records and keeps of its other lines (events, headers, noise: few) what the later steps
look at. The result is the one a whole-file read gives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import polars as pl

from logbook.blocks import LineBlocks
from parsers.reader import Spec, events
from parsers.reader.chunks import THREADS
from parsers.reader.clean import bar_counts, glued_start
from parsers.reader.records import logging_steps, template_records, typed
from parsers.reader.shapes import merged_counts, prepared, shape_counts, templates_from, with_kinds
from parsers.reader.templates import Template

T = TypeVar("T")
R = TypeVar("R")


def two_passes(
    blocks: LineBlocks, spec: Spec
) -> tuple[pl.DataFrame, dict[str, Template], list[pl.DataFrame], str | None]:
    """The lines' frame (of the record lines, only the first of each run, without its
    text: every record line is used), the templates, the
    template records (a frame per block and template) and the stated
    ``logging_steps`` of a file read in blocks."""
    counts, glued = _first_pass(blocks, spec)
    temps = templates_from(counts, spec)
    firsts = dict(zip(counts.get_column("shape"), counts.get_column("example"), strict=True))

    def second(block: pl.DataFrame) -> tuple[pl.DataFrame, list[pl.DataFrame], str | None]:
        df = with_kinds(prepared(block, spec, glued), temps)
        frames = [typed(f) for f in template_records(df, temps, spec, firsts)]
        # record lines are used up: of each run of them, the first is kept (without its
        # text: every record line is used), to part the lines before it from those
        # after (see ``_multiline``); a record line with crash evidence, an overflow or a
        # traceback's start glued onto it is kept whole (see ``extract._glued_crashes``)
        record = (pl.col("kind") == "record").fill_null(False)
        first = record & ~record.shift(1, fill_value=False)
        crash = record & pl.col("body").str.contains(events.GLUED_ANY)
        kept = df.filter(~record | first | crash).with_columns(
            # (a copy of the text: a filter's rows would keep the block's alive)
            pl.when(~record | crash).then(pl.concat_str(pl.col(c), pl.lit(""))).alias(c)
            for c in ("body", "stamp")
        )
        return kept, frames, logging_steps(df)

    lines, frames, stated = [], [], None
    for kept, got, said in in_order(second, blocks):
        lines.append(kept)
        frames += got
        stated = stated if stated is not None else said
    return pl.concat(lines), temps, frames, stated


def _first_pass(blocks: LineBlocks, spec: Spec) -> tuple[pl.DataFrame, str | None]:
    """The file's shape counts and the bar start that splits glued redraws. Each block
    is first read with its own; where that is not the file's (glued bars in some
    blocks only), the pass is made again with the file's."""

    def first(block: pl.DataFrame) -> tuple[tuple[int, ...], pl.DataFrame]:
        bars = bar_counts(block.get_column("text"))
        return bars, shape_counts(prepared(block, spec, glued_start(bars)))

    got = list(in_order(first, blocks))
    bars = tuple(max(b[i] for b, _ in got) for i in range(len(got[0][0])))
    glued = glued_start(bars)
    if any(glued_start(b) != glued for b, _ in got):
        again = in_order(lambda b: shape_counts(prepared(b, spec, glued)), blocks)
        counts = list(again)
    else:
        counts = [c for _, c in got]
    return merged_counts(counts), glued


def in_order(fn: Callable[[T], R], items: Iterable[T], workers: int = THREADS) -> Iterator[R]:
    """``fn`` of each item, at most ``workers`` at a time (items are taken from the
    iterable only as results are given back), in the items' order."""
    if workers < 2:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(workers) as pool:
        pending: deque[Future[R]] = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
