"""Protocol-buffer wire format, read with numpy over many messages at once.

A message is a sequence of fields ``key (varint: field << 3 | wire type) value``; wire
types: 0 varint, 1 fixed 8 bytes, 2 length-delimited (varint length, then bytes),
5 fixed 4 bytes. :func:`walk` reads one level of many messages (each a byte range of
the same buffer) field by field, every message advancing together, and keeps, for the
wanted field numbers, where the last occurrence is and how often it occurs. Nested
messages are read by walking their byte ranges in turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Field:
    """One field number across messages: its last occurrence in each."""

    count: np.ndarray  # int64, occurrences (0 = absent)
    wire: np.ndarray  # int64, wire type of the last occurrence
    pos: np.ndarray  # int64, where the value starts (payload start for wire type 2)
    value: np.ndarray  # uint64, the varint (wire type 0) or payload length (wire type 2)

    @classmethod
    def empty(cls, n: int) -> Field:
        return cls(
            np.zeros(n, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.int64),
            np.zeros(n, np.uint64),
        )  # fmt: skip

    def has(self, wire: int) -> np.ndarray:
        """Messages where the field occurs exactly once, with this wire type."""
        return (self.count == 1) & (self.wire == wire)


def varint(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varint at each position: (value as uint64, length in bytes; 0 = malformed).
    One numpy step per byte, over the varints still running."""
    n = pos.size
    value = np.zeros(n, np.uint64)
    length = np.zeros(n, np.int64)
    live = np.flatnonzero(pos < data.size)
    for k in range(10):
        if not live.size:
            break
        b = data[pos[live] + k]
        value[live] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        done = b < 0x80
        length[live[done]] = k + 1
        live = live[~done]
        live = live[pos[live] + k + 1 < data.size]
    return value, length


def walk(
    data: np.ndarray, start: np.ndarray, end: np.ndarray, wanted: tuple[int, ...]
) -> tuple[dict[int, Field], np.ndarray]:
    """Read one level of the messages ``data[start[i]:end[i]]``.

    Returns the wanted fields and a mask of the messages that are malformed (a value
    running past the end, an unknown wire type, a bad varint)."""
    n = start.size
    fields = {f: Field.empty(n) for f in wanted}
    bad = np.zeros(n, bool)
    pos = start.astype(np.int64).copy()
    active = np.flatnonzero(pos < end)
    while active.size:
        p = pos[active]
        key, klen = varint(data, p)
        wire = (key & np.uint64(7)).astype(np.int64)
        num = (key >> np.uint64(3)).astype(np.int64)
        vpos = p + klen
        val = np.zeros(p.size, np.uint64)
        vlen = np.zeros(p.size, np.int64)
        var = np.flatnonzero((wire == 0) | (wire == 2))
        val[var], vlen[var] = varint(data, vpos[var])
        size = np.select(
            [wire == 0, wire == 1, wire == 2, wire == 5],
            [vlen, np.full(p.size, 8), vlen + val.astype(np.int64), np.full(p.size, 4)],
            -1,
        )
        broken = (klen == 0) | (size < 0) | (((wire == 0) | (wire == 2)) & (vlen == 0))
        nxt = vpos + size
        broken |= nxt > end[active]
        for f, fld in fields.items():
            hit = ~broken & (num == f)
            idx = active[hit]
            fld.count[idx] += 1
            fld.wire[idx] = wire[hit]
            fld.pos[idx] = np.where(wire[hit] == 2, vpos[hit] + vlen[hit], vpos[hit])
            fld.value[idx] = np.where((wire[hit] == 0) | (wire[hit] == 2), val[hit], 0)
        bad[active[broken]] = True
        pos[active] = np.where(broken, end[active], nxt)
        active = active[pos[active] < end[active]]
    return fields, bad


def fixed(data: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """The little-endian fixed-width number (``<f4``, ``<f8``, ``<u2``...) at each position."""
    width = np.dtype(dtype).itemsize
    if pos.size == 0:
        return np.zeros(0, dtype)
    return np.lib.stride_tricks.sliding_window_view(data, width)[pos].view(dtype).ravel()
