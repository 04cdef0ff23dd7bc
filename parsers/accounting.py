"""Line accounting: every physical line of an input in exactly one of five counts.

* ``record_lines``: lines where a record starts (the ``line`` of a metrics row),
* ``event_lines``: other lines an event was read from (a crash, a checkpoint save),
* ``continuation_lines``: the rest of a record or event spread over several lines
  (hard-wrapped records, traceback bodies, multi-line JSON),
* ``ignored``: lines read and put aside (blank, comments, framework noise, copies),
* ``unrecognized``: lines nothing could read (listed by number).

Parsers report records, events, the ignored count and the unrecognized lines; the
continuation lines are what is left. A parser that counts a line twice (ignored and
used) would leave less than nothing: the excess is taken off ``ignored`` and kept as
``overcounted``, so the five always add up to the line count and the fault shows.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import polars as pl

from logbook.parsed import Parsed


class Counts(TypedDict):
    record_lines: int
    event_lines: int
    continuation_lines: int
    ignored: int
    unrecognized: int
    overcounted: int


def count_lines(
    parsed: Parsed, lines: int, lo: int = 1, hi: int | None = None, ignored: int | None = None
) -> Counts:
    """The five counts of lines ``lo..hi`` (all when ``hi`` is None) of a file of
    ``lines`` lines, of which ``ignored`` (default ``parsed.ignored``) were put aside."""
    hi = lines if hi is None else min(hi, lines)
    span = max(0, hi - lo + 1)
    ign = max(0, parsed.ignored if ignored is None else ignored)
    m = parsed.metrics
    if "line" in m.columns:
        rec = _inside(m.get_column("line"), lo, hi)
    else:  # records not tied to lines (binary inputs): one line each at most
        rec = np.arange(min(m.height, span), dtype=np.int64) + lo
    unrec = _inside(parsed.unrecognized, lo, hi)
    ev_lines = [e.source.line for e in parsed.events if e.source and e.source.line]
    ev = _inside(pl.Series(ev_lines, dtype=pl.Int64), lo, hi)
    ev = ev[~(_member(ev, rec) | _member(ev, unrec))]
    used = rec.size + ev.size + unrec.size
    rest = span - used - ign
    over = max(0, -rest)
    return Counts(
        record_lines=int(rec.size),
        event_lines=int(ev.size),
        continuation_lines=max(0, rest),
        ignored=ign - over,
        unrecognized=int(unrec.size),
        overcounted=over,
    )


def _inside(col: pl.Series, lo: int, hi: int) -> np.ndarray:
    """The distinct line numbers of ``col`` within ``lo..hi``, sorted (by a sort and a
    neighbour comparison: O(n) for the sorted lines records come in)."""
    if col.len() == 0:
        return np.empty(0, np.int64)
    vals = col.cast(pl.Int64, strict=False).drop_nulls()
    v = vals.filter((vals >= lo) & (vals <= hi)).to_numpy()
    if v.size > 1 and not bool(np.all(v[1:] >= v[:-1])):
        v = np.sort(v, kind="stable")
    return v[np.r_[True, v[1:] != v[:-1]]] if v.size else v


def _member(x: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each of ``x`` is in ``sorted_set`` (sorted, distinct)."""
    if not sorted_set.size or not x.size:
        return np.zeros(x.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, x), sorted_set.size - 1)
    return sorted_set[at] == x
