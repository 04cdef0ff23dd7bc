"""Many short byte strings of one buffer (tags, plugin names) -> ids of the distinct ones.

The strings become an Arrow binary-view column over the file's bytes (no copy: each
view holds the length and the bytes themselves up to 12, else a prefix and an offset),
polars gives each distinct string an id, and ids are renumbered in order of first
appearance, so the result does not depend on hashing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from parsers.tensorboard.tfrecord import rows

MAX_TAG = 512  # longer tags go the slow way


@dataclass
class Strings:
    ids: np.ndarray  # index into values, per string
    values: list[str]


_INLINE = 12  # an Arrow binary view holds up to 12 bytes itself
_BUF_BITS = 30  # view offsets are int32: the file is seen as 1 GiB buffers


def strings(data: np.ndarray, pos: np.ndarray, ln: np.ndarray) -> Strings:
    """Many short byte strings -> ids of the distinct ones, in order of first appearance
    (exact: the strings become an Arrow binary-view column over the file's bytes, no
    copy, and polars finds the distinct ones)."""
    n = pos.size
    if n == 0:
        return Strings(np.zeros(0, np.int64), [])
    col = _binary_views(data, pos, ln)
    try:
        codes = col.cast(pl.String).cast(pl.Categorical).to_physical().to_numpy()
    except pl.exceptions.PolarsError:  # not UTF-8: compare the bytes themselves
        frame = pl.DataFrame({"t": col})
        distinct = frame.unique(maintain_order=True).with_row_index("id")
        joined = frame.join(distinct, on="t", how="left", maintain_order="left")
        codes = joined.get_column("id").to_numpy()
    uniq, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(uniq.size, np.int64)
    rank[order] = np.arange(uniq.size)
    view = memoryview(data)
    values = [
        bytes(view[int(pos[i]) : int(pos[i]) + int(ln[i])]).decode("utf-8", "replace")
        for i in first[order].tolist()
    ]
    return Strings(rank[inverse.ravel()], values)


def _binary_views(data: np.ndarray, pos: np.ndarray, ln: np.ndarray) -> pl.Series:
    """An Arrow binary-view column of ``data[pos[i] : pos[i] + ln[i]]`` (no copy)."""
    n = pos.size
    views = np.zeros((n, 4), np.int32)
    views[:, 0] = ln
    raw16 = views.view(np.uint8)
    near_end = pos + _INLINE > data.size
    head = rows(data, np.where(near_end, 0, pos), _INLINE)
    head = np.where(np.arange(_INLINE) < ln[:, None], head, 0).astype(np.uint8)
    for i in np.flatnonzero(near_end).tolist():
        k = int(min(ln[i], _INLINE))
        head[i, :] = 0
        head[i, :k] = data[int(pos[i]) : int(pos[i]) + k]
    raw16[:, 4:16] = head
    long = np.flatnonzero(ln > _INLINE)
    raw16[long, 8:16] = 0
    # buffers overlap by more than a tag's length, so a string lies whole in its own
    views[long, 2] = pos[long] >> _BUF_BITS
    views[long, 3] = pos[long] & ((1 << _BUF_BITS) - 1)
    nbuf = (data.size >> _BUF_BITS) + 1
    whole = pa.py_buffer(data)
    span = (1 << _BUF_BITS) + 2 * MAX_TAG
    bufs = [
        whole.slice(k << _BUF_BITS, min(span, data.size - (k << _BUF_BITS))) for k in range(nbuf)
    ]
    arr = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), *bufs])
    col = pl.from_arrow(arr)
    assert isinstance(col, pl.Series)
    return col
