"""Read a log file (plain or gzip) into a polars frame of physical lines.

The frame has two columns: ``line`` (1-based, Int64) and ``text`` (String, without
the line terminator). Lines are split on ``\\n``; a ``\\r`` before it is dropped, so
CRLF files read the same as LF files; a file with no ``\\n`` at all is split on ``\\r``
(old Mac line ends, some terminal captures). Invalid UTF-8 bytes become U+FFFD and the
lines that held them are counted, never dropped.

How: the file's bytes are read once and stay the one copy of the text. numpy finds
the newlines; Arrow offsets that alternate between line starts and line ends make
every line one element of a binary array over those bytes (the newlines in between
are null elements), which polars turns into 16-byte "views" (length, and the bytes
themselves when they fit in 12, else a prefix and an offset into the file's bytes)
and checks as UTF-8, without copying the bytes. So reading costs the file's size plus
24 bytes a line, and no Python loop runs over the lines; only lines with invalid
UTF-8, found by a vectorized check, are decoded one by one (their views are then
built here, as for files too large for one Arrow buffer).
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import mmap
import os
import re
import shutil
import stat
import sys
import tempfile
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from logbook.errors import InputError

BINARY_PROBE = 65536
_SCAN_CHUNK = 1 << 22  # bytes compared at a time, so temporaries stay small
_THREADS = 2  # threads that read and scan a large file side by side
_READ_SLICE = 1 << 24  # bytes one reader thread asks for at a time
_PARALLEL_READ = 1 << 25  # files from this size on are mapped (or read by several threads)
NO_MMAP = "LOGBOOK_NO_MMAP"  # environment variable: read large files into a copy instead
_INLINE = 12  # a view holds a line of at most this many bytes itself
_MAX_BUFFER = 2**31 - 1  # a view's offset is an int32: one data buffer holds at most this
_SCHEMA = {"line": pl.Int64, "text": pl.String}
_BREAKS = re.compile(r"\r\n|\n|\r")


@dataclass
class TextStats:
    """What reading the bytes found, reported by ``logbook parse``."""

    lines: int = 0
    crlf: bool = False
    invalid_utf8_lines: list[int] = field(default_factory=list)
    no_final_newline: bool = False
    cr_only: bool = False  # every line ends with a lone carriage return
    lone_cr: int = 0  # line breaks that are a lone carriage return
    gzip: bool = False


# streams read once into a temp file: the name given -> the file that holds its bytes
_SPOOLS: dict[str, str] = {}
STDIN = "-"


def spool(path: str | Path) -> str | Path:
    """Make a stream readable more than once: ``-`` (standard input), a pipe or FIFO
    (``/dev/stdin``, ``<(cmd)``) is copied once, in slices, into a temp file that
    :func:`local` then gives for the same name (removed at exit). A regular file, a
    folder or a missing path is left as it is. Returns ``path``."""
    name = str(path)
    if name in _SPOOLS:
        return path
    if name != STDIN:
        try:
            mode = os.stat(name).st_mode
        except OSError:
            return path
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return path
    fd, tmp = tempfile.mkstemp(prefix="logbook-stream-", suffix=".log")
    atexit.register(_remove, tmp)
    try:
        with os.fdopen(fd, "wb") as out:
            if name == STDIN:
                shutil.copyfileobj(sys.stdin.buffer, out, _READ_SLICE)
            else:
                with open(name, "rb") as src:
                    shutil.copyfileobj(src, out, _READ_SLICE)
    except OSError as exc:
        _remove(tmp)
        raise InputError(f"{name}: cannot read ({exc.strerror or exc})") from None
    _SPOOLS[name] = tmp
    return path


def local(path: str | Path) -> Path:
    """The file to read for ``path``: its spooled copy for a stream, else itself."""
    return Path(_SPOOLS.get(str(path), path))


def remove_spools() -> None:
    """Remove the temp copies of every stream read so far."""
    for tmp in _SPOOLS.values():
        _remove(tmp)
    _SPOOLS.clear()


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def read_bytes(path: str | Path) -> tuple[bytes, bool]:
    """Return the file's bytes (gunzipped when it is gzip) and whether it was gzip."""
    data, was_gzip = read_buffer(path)
    return bytes(data.data), was_gzip


def read_buffer(path: str | Path) -> tuple[np.ndarray, bool]:
    """The file's bytes as a numpy ``uint8`` array (gunzipped when it is gzip) and
    whether it was gzip."""
    p = Path(path)
    if not local(p).exists():
        raise InputError(f"{p}: no such file")
    if local(p).is_dir():
        raise InputError(f"{p}: is a directory, not a log file")
    try:
        raw = _read_all(local(p))
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if raw[:2].tobytes() == b"\x1f\x8b":
        try:
            data = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{p}: damaged gzip file ({exc})") from None
        return np.frombuffer(data, dtype=np.uint8), True
    return raw, False


def _read_all(p: Path) -> np.ndarray:
    """A regular file's bytes: a large one mapped into memory (read-only; no copy, and
    no fresh memory to clear), or with ``LOGBOOK_NO_MMAP`` set (or where the file
    system cannot map it) read in slices by ``_THREADS`` threads side by side; anything
    else, or a file that shrinks while it is read, by one plain read. A file that grows
    is read up to the size it had when the reading began.

    Like every reader that maps files (polars, ripgrep), the process gets SIGBUS if
    another one truncates the file while it is being parsed; ``LOGBOOK_NO_MMAP=1``
    reads a copy instead."""
    with p.open("rb") as fh:
        st = os.fstat(fh.fileno())
        size = st.st_size
        if not stat.S_ISREG(st.st_mode) or size < _PARALLEL_READ:
            return np.frombuffer(fh.read(), dtype=np.uint8)
        if not os.environ.get(NO_MMAP):
            try:
                return np.frombuffer(
                    mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ), np.uint8
                )
            except (OSError, ValueError):
                pass  # (a file system without mmap: read a copy)
        if not hasattr(os, "preadv"):  # (not on every platform)
            return np.frombuffer(fh.read(), dtype=np.uint8)
        buf = _anonymous(size)
        view = memoryview(buf)
        fd = fh.fileno()

        def fill(start: int) -> bool:
            for a in range(start, size, _READ_SLICE * _THREADS):
                end = min(a + _READ_SLICE, size)
                while a < end:
                    got = os.preadv(fd, [view[a:end]], a)
                    if got <= 0:
                        return False
                    a += got
            return True

        with ThreadPoolExecutor(max_workers=_THREADS) as pool:
            whole = all(pool.map(fill, [i * _READ_SLICE for i in range(_THREADS)]))
        if whole:
            return buf
        fh.seek(0)
        return np.frombuffer(fh.read(), dtype=np.uint8)


def _anonymous(size: int) -> np.ndarray:
    """A writable ``uint8`` array in fresh private memory. Not from numpy's allocator:
    numpy asks for huge pages on large arrays, and the kernel may then stop to compact
    memory on the first touch (a few tenths of a second for a file of 400 MB, where
    plain pages take a tenth)."""
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    if not flags:
        return np.empty(size, dtype=np.uint8)
    return np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=np.uint8)


def check_text(raw: bytes | np.ndarray, name: str) -> None:
    """Refuse empty and binary input with a one-line reason."""
    data = memoryview(raw).cast("B")
    if not data.nbytes or all(
        data[i : i + _SCAN_CHUNK].tobytes().isspace() for i in range(0, data.nbytes, _SCAN_CHUNK)
    ):
        raise InputError(f"{name}: file is empty")
    check_binary(data, name)


def check_binary(raw: bytes | np.ndarray | memoryview, name: str, offset: int = 0) -> None:
    """Refuse input with a NUL byte in its first 64 KiB (``raw`` starting at byte
    ``offset`` of the input)."""
    probe = memoryview(raw).cast("B")[: max(0, BINARY_PROBE - offset)].tobytes()
    nul = probe.find(b"\x00")
    if nul >= 0:
        raise InputError(f"{name}: not a text log (binary data at byte {offset + nul})")


def split_lines(raw: bytes | np.ndarray) -> tuple[pl.DataFrame, TextStats]:
    """Split bytes into a frame of lines without a Python loop over them."""
    stats = TextStats()
    data = np.frombuffer(raw, dtype=np.uint8)
    if not data.size:
        return pl.DataFrame({"line": [], "text": []}, schema=_SCHEMA), stats
    ends = _line_ends(data, stats)
    starts = np.zeros(ends.size, dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    # a line that ends in CR LF: the CR is not part of it
    at = np.minimum(ends, data.size - 1)
    cr = (ends > starts) & (data[np.maximum(ends - 1, 0)] == 13) & (data[at] == 10)
    cr &= ends < data.size
    stats.crlf = bool(cr.any())
    lengths = ends - starts - cr
    if lengths.max() > _MAX_BUFFER:
        raise InputError("a line is longer than 2 GiB: not a text log")
    blob = pa.py_buffer(data)
    text = _lines_over(blob, starts, lengths) if data.size <= _MAX_BUFFER else None
    if text is None:
        views, buffers = _views(data, blob, starts, lengths)
        try:
            text = _to_polars(views, buffers)
        except pl.exceptions.ComputeError:
            bad = _invalid_lines(data, starts)
            text = _replace_lines(data, views, buffers, starts[bad], lengths[bad], bad)
            stats.invalid_utf8_lines = (bad + 1).tolist()
    stats.lines = int(ends.size)
    frame = pl.DataFrame({"line": pl.int_range(1, ends.size + 1, eager=True), "text": text})
    return frame, stats


def _line_ends(data: np.ndarray, stats: TextStats) -> np.ndarray:
    """Where each line ends (the position of its break, or the end of the data for a
    last line without one). Line feeds, CR LF pairs and lone carriage returns (old Mac
    files, progress bars redrawn in place, some terminal captures) are all breaks."""
    hits = _find(data, lambda chunk: chunk == 10)
    if _has_cr(data):
        crs = _find(data, lambda chunk: chunk == 13)
        nxt = np.minimum(crs + 1, data.size - 1)
        paired = (crs + 1 < data.size) & (data[nxt] == 10)  # the CR of a CR LF pair
        lone = crs[~paired]
        if lone.size:
            stats.cr_only = hits.size == 0
            stats.lone_cr = int(lone.size)
            hits = np.sort(np.concatenate([hits, lone]), kind="stable")
    stats.no_final_newline = bool(data[-1] not in (10, 13))
    if stats.no_final_newline:
        hits = np.append(hits, data.size)
    return hits


def _has_cr(data: np.ndarray) -> bool:
    """Whether ``data`` holds a carriage return (at the speed of ``memchr`` where the
    buffer under the array can search itself: a mapped file, bytes)."""
    base = data.base
    base = base.obj if isinstance(base, memoryview) else base
    find = getattr(base, "find", None)
    if find is not None and len(base) == data.size:
        return find(b"\r") >= 0
    return bool(_find(data, lambda chunk: chunk == 13).size)


def _lines_over(blob: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pl.Series | None:
    """The lines as a polars String series over ``blob`` (at most ``_MAX_BUFFER``
    bytes), or None when a line is not valid UTF-8. Offsets alternate between line
    starts and ends: the lines are the even elements, the line breaks between them
    null odd ones."""
    offsets = np.empty(2 * starts.size, dtype=np.int64)
    offsets[0::2] = starts
    offsets[1::2] = starts + lengths
    n = offsets.size - 1
    valid = np.full((n + 7) // 8, 0x55, dtype=np.uint8)  # bits 0, 2, 4, 6: even elements
    arr = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [pa.py_buffer(valid), pa.py_buffer(offsets), blob]
    )
    binary = pl.Series(_ArrowArray(arr))
    try:
        return binary.gather_every(2).cast(pl.String)
    except pl.exceptions.ComputeError:
        return None


def _find(data: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Positions where ``test`` holds, scanning in slices to keep temporaries small
    (side by side on ``_THREADS`` threads: numpy lets go of the GIL while it scans)."""

    def scan(i: int) -> np.ndarray:
        return np.flatnonzero(test(data[i : i + _SCAN_CHUNK])) + i

    starts = range(0, data.size, _SCAN_CHUNK)
    if len(starts) > 1:
        with ThreadPoolExecutor(max_workers=_THREADS) as pool:
            parts = list(pool.map(scan, starts))
    else:
        parts = [scan(i) for i in starts]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _views(
    data: np.ndarray, blob: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, first: int = 0
) -> tuple[np.ndarray, list[pa.Buffer]]:
    """Arrow binary views of the lines of ``data`` (held by ``blob``), and the data
    buffers they point into, numbered from ``first``."""
    n = starts.size
    views = np.zeros((n, 4), dtype=np.int32)
    views[:, 0] = lengths
    raw16 = views.view(np.uint8)
    short = np.flatnonzero(lengths <= _INLINE)
    for j in range(_INLINE):  # inline bytes of short lines, zero-padded
        rows = short[lengths[short] > j]
        raw16[rows, 4 + j] = data[starts[rows] + j]
    long = np.flatnonzero(lengths > _INLINE)
    for j in range(4):  # prefix of long lines
        raw16[long, 4 + j] = data[starts[long] + j]
    bounds = _buffer_bounds(starts, data.size)
    which = np.searchsorted(bounds, starts[long], side="right") - 1
    views[long, 2] = first + which
    views[long, 3] = starts[long] - bounds[which]
    ends = [*bounds[1:].tolist(), data.size]
    buffers = [blob.slice(a, b - a) for a, b in zip(bounds.tolist(), ends, strict=True)]
    return views, buffers


def _buffer_bounds(starts: np.ndarray, size: int) -> np.ndarray:
    """Where each data buffer begins: at line starts, at most ``_MAX_BUFFER`` apart."""
    bounds = [0]
    while size - bounds[-1] > _MAX_BUFFER:
        nxt = int(starts[np.searchsorted(starts, bounds[-1] + _MAX_BUFFER, side="right") - 1])
        if nxt == bounds[-1]:
            raise InputError("a line is longer than 2 GiB: not a text log")
        bounds.append(nxt)
    return np.array(bounds, dtype=np.int64)


def _to_polars(views: np.ndarray, buffers: list[pa.Buffer]) -> pl.Series:
    """A polars String series over the views and buffers, without copying the bytes;
    raises ``ComputeError`` when a line is not valid UTF-8."""
    arr = pa.Array.from_buffers(
        pa.binary_view(), views.shape[0], [None, pa.py_buffer(views), *buffers]
    )
    return pl.Series(_ArrowArray(arr)).cast(pl.String)


class _ArrowArray:
    """An Arrow array seen only through the Arrow C data interface: polars takes it
    without copying and without importing ``pyarrow.compute`` (a twentieth of a second
    at every start)."""

    def __init__(self, array: pa.Array) -> None:
        self._array = array

    def __arrow_c_array__(self, requested_schema: object | None = None) -> object:
        return self._array.__arrow_c_array__(requested_schema)


def _invalid_lines(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Indices of the lines whose bytes are not well-formed UTF-8.

    Only bytes >= 0x80 can be wrong. A lead byte needs 1-3 continuation bytes
    (0x80-0xBF) right after it, with the narrower second-byte ranges that exclude
    overlong forms, surrogates and code points above U+10FFFF; every continuation
    byte must belong to such a sequence; C0, C1 and F5-FF never appear.
    """
    pos = _find(data, lambda chunk: chunk >= 0x80)
    b = data[pos].astype(np.int64)
    need = np.select([(b >= 0xC2) & (b <= 0xDF), (b >= 0xE0) & (b <= 0xEF), b >= 0xF0], [1, 2, 3])
    need[b > 0xF4] = 0
    cont = b <= 0xBF
    pad = np.concatenate([pos, np.full(3, -9)])
    bpad = np.concatenate([b, np.zeros(3, dtype=np.int64)])
    idx = np.arange(pos.size)
    ok = need > 0
    for j in range(1, 4):
        follows = (pad[idx + j] == pos + j) & (bpad[idx + j] >= 0x80) & (bpad[idx + j] <= 0xBF)
        ok &= follows | (need < j)
    second = bpad[idx + 1]
    low = np.select([b == 0xE0, b == 0xF0], [0xA0, 0x90], 0x80)
    high = np.select([b == 0xED, b == 0xF4], [0x9F, 0x8F], 0xBF)
    ok &= (second >= low) & (second <= high)
    claimed = np.zeros(pos.size + 3, dtype=bool)
    for j in range(1, 4):
        claimed[idx[ok & (need >= j)] + j] = True
    bad = (~cont & ~ok) | (cont & ~claimed[: pos.size])
    return np.unique(np.searchsorted(starts, pos[bad], side="right") - 1)


def _replace_lines(
    data: np.ndarray,
    views: np.ndarray,
    buffers: list[pa.Buffer],
    starts: np.ndarray,
    lengths: np.ndarray,
    rows: np.ndarray,
) -> pl.Series:
    """Decode the invalid lines with U+FFFD replacements into an extra buffer, point
    their views at it, and build the series (a loop over the bad lines only)."""
    fixed = [
        data[s : s + n].tobytes().decode("utf-8", errors="replace").encode("utf-8")
        for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)
    ]
    blob = b"".join(fixed)
    sizes = np.array([len(x) for x in fixed], dtype=np.int64)
    new_starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    data = np.frombuffer(blob, dtype=np.uint8)
    extra, more = _views(data, pa.py_buffer(blob), new_starts, sizes, first=len(buffers))
    views[rows] = extra
    return _to_polars(views, [*buffers, *more])


def read_lines(path: str | Path) -> tuple[pl.DataFrame, TextStats]:
    """Read a text log into a frame of lines; refuse missing, empty and binary files."""
    raw, was_gzip = read_buffer(path)
    check_text(raw, str(path))
    frame, stats = split_lines(raw)
    stats.gzip = was_gzip
    return frame, stats


def head_lines(path: str | Path, n: int = 200, max_bytes: int = 1 << 20) -> list[str]:
    """The first lines of a file (for format sniffing), decoded leniently."""
    p = Path(path)
    with local(p).open("rb") as fh:
        start = fh.read(2)
    opener = gzip.open if start == b"\x1f\x8b" else open
    try:
        with opener(local(p), "rb") as fh:
            chunk = fh.read(max_bytes)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{p}: cannot read ({exc})") from None
    check_text(chunk, str(p)) if chunk else None
    text = chunk.decode("utf-8", errors="replace")
    # the same line breaks as split_lines: LF, CR LF and a lone CR, nothing else
    lines = _BREAKS.split(text, maxsplit=n)[:n]
    if lines and lines[-1] == "" and len(lines) < n:
        lines.pop()
    return lines
