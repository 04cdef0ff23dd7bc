"""Read a log file (plain or gzip) into a polars frame of physical lines.

The frame has two columns: ``line`` (1-based, Int64) and ``text`` (String, without
the line terminator). Lines are split on ``\\n``; a ``\\r`` before it is dropped, so
CRLF files read the same as LF files. Invalid UTF-8 bytes become U+FFFD and the
lines that held them are counted, never dropped.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from logbook.errors import InputError

_BINARY_PROBE = 65536


@dataclass
class TextStats:
    """What reading the bytes found, reported by ``logbook parse``."""

    lines: int = 0
    crlf: bool = False
    invalid_utf8_lines: list[int] = field(default_factory=list)
    no_final_newline: bool = False
    gzip: bool = False


def read_bytes(path: str | Path) -> tuple[bytes, bool]:
    """Return the file's bytes (gunzipped when it is gzip) and whether it was gzip."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a log file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw), True
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{p}: damaged gzip file ({exc})") from None
    return raw, False


def check_text(raw: bytes, name: str) -> None:
    """Refuse empty and binary input with a one-line reason."""
    if not raw.strip():
        raise InputError(f"{name}: file is empty")
    nul = raw.find(b"\x00", 0, _BINARY_PROBE)
    if nul >= 0:
        raise InputError(f"{name}: not a text log (binary data at byte {nul})")


def split_lines(raw: bytes) -> tuple[pl.DataFrame, TextStats]:
    """Split bytes into a frame of lines without a Python loop over them."""
    stats = TextStats()
    if not raw:
        return pl.DataFrame({"line": [], "text": []}, schema=_SCHEMA), stats
    stats.no_final_newline = not raw.endswith(b"\n")
    if not stats.no_final_newline:
        raw = raw[:-1]
    data = np.frombuffer(raw, dtype=np.uint8)
    drop = np.flatnonzero(data == 10)
    n_lines = drop.size + 1
    # line i starts right after newline i-1; \r directly before a newline goes too
    starts = np.empty(n_lines, dtype=np.int64)
    starts[0] = 0
    starts[1:] = drop + 1
    cr = drop[(drop > 0)]
    cr = cr[data[cr - 1] == 13] - 1 if cr.size else cr
    if raw.endswith(b"\r"):
        cr = np.append(cr, len(raw) - 1)
    stats.crlf = bool(cr.size)
    removed = np.sort(np.concatenate([drop, cr])) if cr.size else drop
    compact = np.delete(data, removed) if removed.size else data
    # offsets in the compacted buffer: each start moves left by the bytes removed before it
    offsets = np.empty(n_lines + 1, dtype=np.int64)
    offsets[:-1] = starts - np.searchsorted(removed, starts)
    offsets[-1] = compact.size
    del data, drop, starts, removed
    arr = pa.LargeStringArray.from_buffers(n_lines, pa.py_buffer(offsets), pa.py_buffer(compact))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        return _split_lossy(bytes(compact), offsets, stats)
    text = pl.from_arrow(arr)
    stats.lines = n_lines
    frame = pl.DataFrame({"line": pl.int_range(1, n_lines + 1, eager=True), "text": text})
    return frame, stats


_SCHEMA = {"line": pl.Int64, "text": pl.String}


def _split_lossy(
    compact: bytes, offsets: np.ndarray, stats: TextStats
) -> tuple[pl.DataFrame, TextStats]:
    """Slow path for files with invalid UTF-8: decode each line with replacement."""
    texts: list[str] = []
    bad: list[int] = []
    for i in range(offsets.size - 1):
        chunk = compact[offsets[i] : offsets[i + 1]]
        try:
            texts.append(chunk.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(chunk.decode("utf-8", errors="replace"))
            bad.append(i + 1)
    stats.lines = len(texts)
    stats.invalid_utf8_lines = bad
    frame = pl.DataFrame(
        {"line": pl.int_range(1, len(texts) + 1, eager=True), "text": texts}, schema=_SCHEMA
    )
    return frame, stats


def read_lines(path: str | Path) -> tuple[pl.DataFrame, TextStats]:
    """Read a text log into a frame of lines; refuse missing, empty and binary files."""
    raw, was_gzip = read_bytes(path)
    check_text(raw, str(path))
    frame, stats = split_lines(raw)
    stats.gzip = was_gzip
    return frame, stats


def head_lines(path: str | Path, n: int = 200, max_bytes: int = 1 << 20) -> list[str]:
    """The first lines of a file (for format sniffing), decoded leniently."""
    p = Path(path)
    with p.open("rb") as fh:
        start = fh.read(2)
    opener = gzip.open if start == b"\x1f\x8b" else open
    try:
        with opener(p, "rb") as fh:
            chunk = fh.read(max_bytes)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{p}: cannot read ({exc})") from None
    check_text(chunk, str(p)) if chunk else None
    return chunk.decode("utf-8", errors="replace").splitlines()[:n]
