"""TFRecord framing, as TensorBoard event files use it, read with numpy.

A file is a chain of records::

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

(little endian). Each record's start depends on the previous record's length, so the
chain is walked; but writers repeat themselves (the same tags in the same order, step
after step), so after a few records read one by one the reader predicts the next
thousands from the period of the recent lengths and checks the prediction with one
vectorized gather, falling back to one-by-one reading where it fails. CRC32C
(Castagnoli) is computed with numpy over many records at once, one byte column at a
time, shortest records dropping out first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HEADER = 12  # length (8) + its CRC (4)
FOOTER = 4  # CRC of the data
_WALK = 48  # records read one by one before predicting
_MAX_PERIOD = 24
_MAX_BLOCK = 1 << 20  # records predicted at once, at most
_POLY = 0x82F63B78  # CRC-32C, reflected
_MASK_DELTA = 0xA282EAD8


def _tables() -> np.ndarray:
    """Slicing-by-4 tables: row 0 is the byte table; row k advances k more zero bytes."""
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    out = [t]
    for _ in range(3):
        prev = out[-1]
        out.append((prev >> np.uint32(8)) ^ t[prev & 0xFF])
    return np.stack(out)


TABLES = _tables()
TABLE = TABLES[0]
_TABLE_LIST = TABLE.tolist()
_GROUP_MIN = 256  # records of one length read as one matrix from this many


@dataclass
class Framing:
    """Where the records of one file are, and where reading stopped early."""

    offsets: np.ndarray  # int64, start of each record's header
    lengths: np.ndarray  # int64, data length of each record
    bad_header: int | None = None  # byte where a length failed its CRC (nothing after read)
    truncated: int | None = None  # byte where a record begins that the file cuts short

    @property
    def data_starts(self) -> np.ndarray:
        return self.offsets + HEADER


def mask(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC: rotate right by 15 bits, add a constant (mod 2**32)."""
    crc = crc.astype(np.uint64)
    rot = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rot + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def crc32c(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """CRC-32C of ``data[starts[i] : starts[i] + lengths[i]]`` for every i, vectorized over
    the records: records of a common length as one byte matrix, four bytes a step; the
    rest one byte column a step, shortest records dropping out first."""
    out = np.zeros(starts.size, dtype=np.uint32)
    if starts.size == 0:
        return out
    sizes, inverse, counts = np.unique(lengths, return_inverse=True, return_counts=True)
    rare = np.zeros(starts.size, bool)
    for k, (size, count) in enumerate(zip(sizes.tolist(), counts.tolist(), strict=True)):
        which = np.flatnonzero(inverse == k)
        if count >= _GROUP_MIN and size > 0:
            out[which] = _crc_matrix(rows(data, starts[which], int(size)))
        else:
            rare[which] = True
    r = np.flatnonzero(rare)
    if r.size:
        out[r] = _crc_columns(data, starts[r], lengths[r])
    return out


def rows(data: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each start, as an (n, width) array (one row copy each)."""
    if width == 0:
        return np.zeros((starts.size, 0), np.uint8)
    return np.lib.stride_tricks.sliding_window_view(data, width)[starts]


def _crc_matrix(m: np.ndarray) -> np.ndarray:
    n, width = m.shape
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    whole = width - width % 4
    if whole:
        words = np.ascontiguousarray(m[:, :whole]).view("<u4")
        t0, t1, t2, t3 = TABLES
        for w in range(words.shape[1]):
            x = crc ^ words[:, w]
            crc = t3[x & 0xFF] ^ t2[(x >> 8) & 0xFF] ^ t1[(x >> 16) & 0xFF] ^ t0[x >> 24]
    for j in range(whole, width):
        crc = TABLE[(crc ^ m[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def _crc_columns(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    n = starts.size
    out = np.zeros(n, dtype=np.uint32)
    order = np.argsort(-lengths, kind="stable")
    base = starts[order].astype(np.int64)
    lens = lengths[order]
    longest = int(lens[0])
    counts = np.searchsorted(-lens, -np.arange(longest), side="left")
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    for j in range(longest):
        c = int(counts[j])
        head = crc[:c]
        crc[:c] = TABLE[(head ^ data[base[:c] + j]) & 0xFF] ^ (head >> np.uint32(8))
    out[order] = crc ^ np.uint32(0xFFFFFFFF)
    return out


def crc32c_bytes(buf: bytes | memoryview) -> int:
    """CRC-32C of one buffer (a Python loop: for the few records read one by one)."""
    crc = 0xFFFFFFFF
    table = _TABLE_LIST
    for b in bytes(buf):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _u64_at(data: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Little-endian uint64 at each position (positions must leave 8 bytes)."""
    return rows(data, pos, 8).view("<u8").ravel()


def _u32_at(data: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return rows(data, pos, 4).view("<u4").ravel()


def _period(lengths: list[int]) -> int | None:
    """The smallest period of the recent lengths (seen at least twice), if any."""
    for p in range(1, min(_MAX_PERIOD, len(lengths) // 2) + 1):
        if lengths[-p:] == lengths[-2 * p : -p]:
            return p
    return None


def frame(raw: bytes) -> Framing:
    """The record chain of one file, with each header's CRC checked."""
    data = np.frombuffer(raw, dtype=np.uint8)
    size = data.size
    offs: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    recent: list[int] = []
    o, total, wait = 0, 0, _WALK
    truncated = None
    while o < size:
        if size - o < HEADER:
            truncated = o
            break
        n = int.from_bytes(raw[o : o + 8], "little")
        if o + HEADER + n + FOOTER > size:
            truncated = o
            break
        offs.append(np.array([o], dtype=np.int64))
        lens.append(np.array([n], dtype=np.int64))
        recent.append(n)
        o += HEADER + n + FOOTER
        total += 1
        wait -= 1
        if wait > 0:
            continue
        p = _period(recent)
        got = _predict(data, o, recent[-p:], total) if p else None
        if got is None or got[1].size == 0:
            wait = _WALK // 4  # no pattern here: read on one by one for a while
            recent = recent[-2 * _MAX_PERIOD :]
            continue
        o = got[0]
        offs.append(got[1])
        lens.append(got[2])
        total += got[1].size
        recent = got[2][-2 * _MAX_PERIOD :].tolist()
        wait = 0 if got[1].size else _WALK // 4
    offsets = np.concatenate(offs) if offs else np.zeros(0, dtype=np.int64)
    lengths = np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64)
    return _check_headers(data, Framing(offsets, lengths, truncated=truncated))


def _predict(
    data: np.ndarray, o: int, pattern: list[int], done: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """Predict the records from ``o`` on as repeats of ``pattern``; keep the prefix that
    the file confirms. Returns the next unread offset and the confirmed records."""
    size = data.size
    step = np.array(pattern, dtype=np.int64) + HEADER + FOOTER
    block = int(min(_MAX_BLOCK, max(1024, done)))
    reps = max(1, block // len(pattern))
    pred_n = np.tile(np.array(pattern, dtype=np.int64), reps)
    pred_o = o + np.concatenate([[0], np.cumsum(np.tile(step, reps))[:-1]])
    fits = pred_o + HEADER + pred_n + FOOTER <= size
    stop = int(np.argmin(fits)) if not fits.all() else fits.size
    pred_o, pred_n = pred_o[:stop], pred_n[:stop]
    if pred_o.size == 0:
        return o, pred_o, pred_n
    actual = _u64_at(data, pred_o).astype(np.int64)
    wrong = np.flatnonzero(actual != pred_n)
    keep = int(wrong[0]) if wrong.size else pred_o.size
    got_o, got_n = pred_o[:keep], pred_n[:keep]
    nxt = int(got_o[-1] + HEADER + got_n[-1] + FOOTER) if keep else o
    return nxt, got_o, got_n


def _check_headers(data: np.ndarray, fr: Framing) -> Framing:
    """Stop the chain at the first record whose length fails its CRC."""
    if fr.offsets.size == 0:
        return fr
    stored = _u32_at(data, fr.offsets + 8)
    computed = mask(crc32c(data, fr.offsets, np.full(fr.offsets.size, 8, dtype=np.int64)))
    bad = np.flatnonzero(stored != computed)
    if bad.size == 0:
        return fr
    first = int(bad[0])
    return Framing(
        fr.offsets[:first], fr.lengths[:first], bad_header=int(fr.offsets[first]), truncated=None
    )


def data_crc_ok(data: np.ndarray, fr: Framing, which: np.ndarray) -> np.ndarray:
    """Whether the data CRC of the records ``which`` (indices) holds."""
    starts = fr.data_starts[which]
    lengths = fr.lengths[which]
    stored = _u32_at(data, starts + lengths)
    return mask(crc32c(data, starts, lengths)) == stored
