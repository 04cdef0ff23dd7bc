"""The lines of a large text log in blocks of consecutive lines, read as often as needed.

A block is what one read of ``BLOCK_BYTES`` gives, up to its last line break; the rest
(a line cut at the block's edge, a carriage return whose line feed may follow) starts
the next block. Each block is a frame of ``line`` (numbered over the whole file) and
``text``, as :func:`logbook.textio.split_lines` makes it, so a reader that treats each
line on its own reads a file of any size in the memory of a few blocks. Plain and gzip
files alike: the bytes are read, never mapped, so that a block let go is memory given
back (the pages of a mapped file stay counted while the mapping lives).
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import polars as pl

from logbook.errors import InputError
from logbook.textio import BINARY_PROBE, TextStats, check_binary, local, split_lines

BLOCK_BYTES = 1 << 21  # bytes a read asks for
_SCAN = 1 << 20  # bytes of a block tested for white space at a time
STREAM_MIN = 1 << 26  # a plain file from this size on is read in blocks (gzip: an 8th)


def streamable(path: str | Path) -> bool:
    """Whether the file is large enough to be read in blocks."""
    p = local(path)
    try:
        size, gz = os.stat(p).st_size, _gzipped(p)
    except OSError:
        return False
    return size >= (STREAM_MIN // 8 if gz else STREAM_MIN)


def _gzipped(p: Path) -> bool:
    with p.open("rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


class LineBlocks:
    """The lines of one file as blocks (iterate: one frame a block; iterate again:
    the same blocks from the start). ``stats`` covers the whole file once one pass
    has ended."""

    def __init__(
        self,
        path: str | Path,
        block_bytes: int | None = None,
        transform: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    ) -> None:
        self.path = local(path)
        self.name = str(path)
        self.block_bytes = max(1, BLOCK_BYTES if block_bytes is None else block_bytes)
        self.stats = TextStats()
        self._counted = False
        self._transform = transform

    def transformed(self, fn: Callable[[pl.DataFrame], pl.DataFrame]) -> LineBlocks:
        """The same file's blocks, each passed through ``fn`` (a frame of the same lines)."""
        out = LineBlocks(self.name, self.block_bytes, fn)
        out.path = self.path
        return out

    def __iter__(self) -> Iterator[pl.DataFrame]:
        stats = TextStats()
        first, seen, lf = 1, False, False
        fh, stats.gzip = self._open()
        with fh:
            offset = 0  # bytes before this block
            for raw in _pieces(fh, self.block_bytes, self.name, stats.gzip):
                if offset < BINARY_PROBE:  # the first 64 KiB, as for a whole file
                    check_binary(raw, self.name, offset)
                offset += len(raw)
                seen = seen or not _blank(raw)
                lf = lf or _has(raw, b"\n")
                frame, got = split_lines(raw)
                frame = frame.with_columns(pl.col("line") + (first - 1))
                _add(stats, got, first)
                first += got.lines
                yield frame if self._transform is None else self._transform(frame)
        if not seen:
            raise InputError(f"{self.name}: file is empty")
        stats.cr_only = stats.lone_cr > 0 and not lf
        if not self._counted:
            self.stats, self._counted = stats, True

    def _open(self) -> tuple[BinaryIO, bool]:
        gz = _gzipped(self.path)
        return (gzip.open(self.path, "rb") if gz else self.path.open("rb")), gz


def _pieces(fh: BinaryIO, size: int, name: str, gz: bool) -> Iterator[memoryview]:
    """Reads of about ``size`` bytes, each cut after its last line break; the bytes
    after it begin the next piece. Each piece has memory of its own (the lines of a
    block may live on while the next is read)."""
    carry = b""
    while True:
        buf = bytearray(len(carry) + size)
        buf[: len(carry)] = carry
        try:
            got = fh.readinto(memoryview(buf)[len(carry) :])
        except (OSError, EOFError, zlib.error) as exc:
            if gz and not isinstance(exc, FileNotFoundError | PermissionError):
                raise InputError(f"{name}: damaged gzip file ({exc})") from None
            why = getattr(exc, "strerror", None) or exc
            raise InputError(f"{name}: cannot read ({why})") from None
        end = len(carry) + got
        if not got:
            if carry:
                yield memoryview(buf)[:end]
            return
        cut = _cut(buf, end)
        if cut == 0:  # no break to cut at yet: read on
            carry = bytes(buf[:end])
            continue
        carry = bytes(buf[cut:end])
        yield memoryview(buf)[:cut]


def _cut(buf: bytearray, end: int) -> int:
    """Where to cut ``buf[:end]``: after the last line feed, else after the last
    carriage return that is not the final byte (a line feed may follow it); 0:
    nowhere."""
    lf = buf.rfind(b"\n", 0, end)
    if lf >= 0:
        return lf + 1
    cr = buf.rfind(b"\r", 0, end - 1)
    return cr + 1 if cr >= 0 else 0


def _add(total: TextStats, got: TextStats, first: int) -> None:
    """Fold one block's reading into the file's (lines numbered from ``first``)."""
    total.crlf |= got.crlf
    total.invalid_utf8_lines += [n + first - 1 for n in got.invalid_utf8_lines]
    total.no_final_newline = got.no_final_newline
    total.lone_cr += got.lone_cr
    total.lines += got.lines


def _blank(raw: memoryview) -> bool:
    return all(raw[i : i + _SCAN].tobytes().isspace() for i in range(0, len(raw), _SCAN))


def _has(raw: memoryview, byte: bytes) -> bool:
    return raw.obj.find(byte, 0, len(raw)) >= 0
