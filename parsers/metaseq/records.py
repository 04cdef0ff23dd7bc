"""Decode the ``train_inner`` payloads of a metaseq/fairseq log into numbers.

A log holds up to millions of payloads. They are read in chunks (``CHUNK`` rows at
most, ``GROUP`` rows at once, one chunk a thread: polars runs the chunk queries in
parallel), and each chunk becomes numbers at once (``Float64``; a value that does not
read as a number is null): the payload texts cut into pieces, or decoded as text,
never exist for the whole file.

In a chunk, the rows that share the key layout of the previous chunk (or of one of
its first rows) are read by ``parsers.metaseq.layout``, without JSON decoding; the
rows it leaves go to the next layout that fits one of them, and the few left after
that (another key order, a key more or less, escapes, a payload cut short) to
``parsers.json_decode`` with every value as text, then cast. Both ways give the
same numbers.

Columns come in the order their keys are first seen, row by row; a key that only
ever holds text (or null) still gets its (all-null) column, which
``parsers.metaseq.columns.to_metrics`` drops.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from parsers import json_decode as jd
from parsers.metaseq.layout import OK, Layout

CHUNK = 100_000  # rows a chunk, at most
GROUP = 100_000  # rows read at once, at most (in chunks, one a thread)
_MIN_CHUNK = 25_000
_TRIES = 4  # layouts tried on one chunk
_CANDIDATES = 8  # leading rows looked at for a layout
_MIN_ROWS = 64  # fewer rows left than this: not worth another layout
_HEIGHT = "\0height"  # the column of a frame of objects without keys


class Decoded:
    """What the chunks gave, kept as they come (so that their frames go at once): the
    number frames and the input rows of their rows, which rows are no JSON object,
    and where each key was first seen (row, place in its row)."""

    def __init__(self) -> None:
        self.parts: list[tuple[pl.DataFrame, np.ndarray]] = []
        self.bad: list[np.ndarray] = []
        self.first_seen: dict[str, tuple[int, int]] = {}

    def see(self, keys: list[str], rows: list[int]) -> None:
        for pos, (key, row) in enumerate(zip(keys, rows, strict=True)):
            self.see_one(key, row, pos)

    def see_one(self, key: str, row: int, pos: int) -> None:
        if key not in self.first_seen or (row, pos) < self.first_seen[key]:
            self.first_seen[key] = (row, pos)

    def put(self, frame: pl.DataFrame, rows: np.ndarray) -> None:
        """Keep the numbers of ``frame``, whose rows are the input rows ``rows``."""
        if rows.size:
            self.parts.append((frame, rows))

    def frame(self) -> tuple[pl.DataFrame, np.ndarray]:
        """The numbers of the rows read, a Float64 column per key in the order the keys
        were first seen (null where a row has no value), and the input position of
        each row."""
        keys = sorted(self.first_seen, key=lambda k: self.first_seen[k])
        schema = dict.fromkeys(keys, pl.Float64)
        if not self.parts:
            return pl.DataFrame(schema=schema), np.zeros(0, dtype=np.int64)
        rows = np.concatenate([r for _, r in self.parts])
        # a frame without columns (objects without keys) still counts its rows
        frames = [f if f.width else _empty(r.size) for f, r in self.parts]
        self.parts = []
        whole = pl.concat(frames, how="diagonal_relaxed")
        if rows.size > 1 and (np.diff(rows) < 0).any():
            order = np.argsort(rows, kind="stable")
            rows, whole = rows[order], whole[order]
        columns = [
            whole.get_column(k).cast(pl.Float64)
            if k in whole.columns
            else pl.repeat(None, whole.height, dtype=pl.Float64, eager=True).alias(k)
            for k in keys
        ]
        if not columns:  # objects without keys: rows all the same
            return _empty(rows.size).drop(_HEIGHT), rows
        # one chunk a column (once here, rather than in every query that reads them)
        return pl.DataFrame(columns, schema=schema).rechunk(), rows


def _empty(height: int) -> pl.DataFrame:
    return pl.DataFrame({_HEIGHT: np.full(height, np.nan)})


def decode(payload: pl.Series) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """Numbers of every payload that is a JSON object: a frame with one Float64 column
    per key, the input position of each of its rows (ascending), and the positions of
    the payloads that are no JSON object."""
    out = Decoded()
    layouts: list[Layout] = []
    chunk, parallel = _sizes()
    starts = list(range(0, payload.len(), chunk))
    for group in (starts[i : i + parallel] for i in range(0, len(starts), parallel)):
        # the chunks of a group are read at once (polars runs the queries in parallel)
        chunks = [payload.slice(s, chunk) for s in group]
        picked = [layouts[0] if layouts else _layout(c, layouts) for c in chunks]
        scans = [lay.scan(c) for c, lay in zip(chunks, picked, strict=True) if lay is not None]
        done = iter(pl.collect_all(scans))
        for s, c, lay in zip(group, chunks, picked, strict=True):
            first = (lay, lay.settle(next(done), c)) if lay is not None else None
            _chunk(c, s, first, layouts, out)
    frame, rows = out.frame()
    bad = np.concatenate(out.bad) if out.bad else np.zeros(0, np.int64)
    return frame, rows, np.sort(bad)


def _sizes() -> tuple[int, int]:
    """Rows a chunk, and chunks read at once: about ``CHUNK`` rows per thread, and
    ``GROUP`` rows at once in all (their texts cut in pieces are what costs memory)."""
    threads = max(1, min(pl.thread_pool_size(), GROUP // _MIN_CHUNK))
    return max(_MIN_CHUNK, min(CHUNK, GROUP // threads)), threads


def _chunk(
    payload: pl.Series,
    start: int,
    first: tuple[Layout, pl.DataFrame] | None,
    layouts: list[Layout],
    out: Decoded,
) -> None:
    """Decode one chunk into ``out``: ``first``, a layout and what it read of the
    chunk; the rows it left go to the next layout that fits one of them, and the rest
    to the JSON decoder. ``layouts``: the layouts met so far (best first)."""
    rows = np.arange(start, start + payload.len(), dtype=np.int64)
    some = False  # whether a layout read rows
    read = first
    for attempt in range(_TRIES):
        if read is None and attempt:
            break
        varied = False
        if read is not None:
            layout, got = read
            ok = got.get_column(OK).to_numpy()
            varied = attempt > 0 and 2 * ok.sum() < ok.size  # a new layout read few
            if ok.any():
                got = got.drop(OK) if ok.all() else got.drop(OK).filter(pl.Series(ok))
                out.put(got, rows[ok])
                some = True
                out.see(layout.keys, [int(rows[ok][0])] * len(layout.keys))
                payload, rows = payload.filter(pl.Series(~ok)), rows[~ok]
        if attempt == 0:  # JSON allows blanks after the object: no layout does
            payload = payload.str.strip_chars()
        # another layout, unless the rows left are few or vary: then the JSON decoder
        # is the cheaper way
        enough = payload.len() >= (_MIN_ROWS if some else 1) and not varied
        nxt = _layout(payload, layouts) if enough else None
        read = (nxt, nxt.read(payload)) if nxt is not None else None
    if payload.len():
        _json(payload, rows, out)


def _layout(payload: pl.Series, layouts: list[Layout]) -> Layout | None:
    """The layout of one of the first rows: a known one when it fits (moved to the
    front), else a new one."""
    for text in payload.head(_CANDIDATES).to_list():
        if text is None:
            continue
        for i, known in enumerate(layouts):
            if known.read(pl.Series([text])).get_column(OK).item():
                layouts.insert(0, layouts.pop(i))
                return known
        layout = Layout.of(text)
        if layout is not None:
            layouts.insert(0, layout)
            return layout
    return None


def _json(payload: pl.Series, rows: np.ndarray, out: Decoded) -> None:
    """The rows no layout read, through the JSON decoder (values as text, then cast)."""
    frame, slow, bad = jd.decode(payload, strings=True)
    out.bad.append(rows[bad])
    if frame.height:
        at = rows[frame.get_column(jd.ROW).to_numpy()]
        _see_columns(frame, payload.gather(frame.get_column(jd.ROW)), at, out)
        out.put(_numbers(frame.drop(jd.ROW)), at)
    if slow:
        extra = pl.DataFrame([s["obj"] for s in slow], infer_schema_length=None)
        at = rows[np.array([s[jd.ROW] for s in slow], dtype=np.int64)]
        for s, row in zip(slow, at.tolist(), strict=True):
            out.see(list(s["obj"]), [row] * len(s["obj"]))
        out.put(_numbers(extra.cast(pl.String)), at)


def _see_columns(frame: pl.DataFrame, texts: pl.Series, at: np.ndarray, out: Decoded) -> None:
    """Where the keys of decoded rows (``frame``, from ``texts``; ``at``: their input
    positions) were first seen: their first value, unless an earlier row holds the key
    with a null value (then found in the text of those few rows)."""
    frame = frame.drop(jd.ROW)
    if not frame.width:
        return
    firsts = frame.select(pl.all().is_not_null().arg_max()).row(0)
    has = frame.select(pl.all().is_not_null().any()).row(0)
    first = [int(i) if v else len(at) for i, v in zip(firsts, has, strict=True)]
    out.see(frame.columns, [int(at[i]) if i < len(at) else int(at[-1]) + 1 for i in first])
    early = texts.head(max(first))
    nulls = np.flatnonzero(early.str.contains("null", literal=True).fill_null(False))
    if nulls.size:
        places = jd.key_places(early.gather(nulls)).group_by("key", maintain_order=True).first()
        for key, i, place in places.select("key", "row", "place").iter_rows():
            out.see_one(key, int(at[nulls[i]]), place)


def _numbers(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(pl.all().cast(pl.Float64, strict=False))
