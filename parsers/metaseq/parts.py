"""Run one polars query on slices of a frame at once.

polars runs a string kernel (a regex, a split) on one column in one thread; on a few
slices collected together (``pl.collect_all``) it uses as many threads as there are
slices. A slice holds ``PART`` rows at least, and there are no more slices than
threads, so small inputs run as one query.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

PART = 100_000


def in_parts(
    frame: pl.DataFrame, query: Callable[[pl.LazyFrame], pl.LazyFrame], part: int = PART
) -> pl.DataFrame:
    """``query`` on ``frame``, run on slices of it at once; its rows in order."""
    parts = max(1, min(pl.thread_pool_size(), frame.height // part))
    size = -(-frame.height // parts)
    slices = [frame.slice(i * size, size).lazy() for i in range(parts)]
    return pl.concat(pl.collect_all([query(s) for s in slices]))
