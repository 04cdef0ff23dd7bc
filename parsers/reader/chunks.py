"""Row-wise work on a large frame, split in slices run side by side: a polars string
expression over one column runs on one core, slices of it on several."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import polars as pl

MIN_ROWS = 200_000  # rows a slice, at least: a frame smaller than twice this is one slice
THREADS = max(1, min(4, os.cpu_count() or 1))


def by_slices(df: pl.DataFrame, fn: Callable[[pl.DataFrame], pl.DataFrame]) -> pl.DataFrame:
    """``fn`` of ``df``, computed on row slices in threads and put back in order (``fn``
    must treat every row on its own)."""
    n = max(1, df.height // MIN_ROWS)
    if n == 1:
        return fn(df)
    size = -(-df.height // n)
    slices = [df.slice(i * size, size) for i in range(n)]
    # several slices a thread: what one slice needs in between is freed before the next
    with ThreadPoolExecutor(min(THREADS, n)) as pool:
        parts = list(pool.map(fn, slices))
    return pl.concat(parts, rechunk=False)
