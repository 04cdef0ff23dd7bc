"""Following a growing log: the lines appended since the last read, whole lines only.

A :class:`Follower` holds one open file. Each :meth:`Follower.read` returns the complete
lines written since the previous read, numbered on from the lines already handed out; a
line still being written (no line break yet) waits for the next read. The file it
follows may be renamed away and replaced (``logrotate``'s default, a launcher's
``train.log`` -> ``train.log.1``): the old file is read to its end first (its last
line, cut or not, is then whole), and the new one is followed from its first byte. A
file truncated in place (``copytruncate``) is read again from its start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from logbook.errors import InputError
from logbook.textio import split_lines

READ_MAX = 64 << 20  # bytes taken per read: a long log already there is caught up in steps
_GZIP = b"\x1f\x8b"


@dataclass
class Follower:
    """One followed log file (see the module docstring)."""

    path: Path
    lines: int = 0  # lines handed out so far
    rotations: int = 0
    _fh: object | None = field(default=None, repr=False)
    _ino: int | None = None
    _pending: bytes = b""
    _checked: bool = False
    behind: bool = False  # the last read stopped at READ_MAX with more to come

    def read(self) -> pl.DataFrame | None:
        """The complete lines appended since the last read (``line``: 1-based over all
        the lines this follower handed out, ``text``), or None when there are none."""
        if self._fh is None and not self._open():
            return None
        data = self._fh.read(READ_MAX)
        self.behind = len(data) == READ_MAX
        if not self.behind:
            switched = self._switch()
            if switched is not None:  # the old file is done: its last line is whole
                rest, fresh = switched
                data += rest
                if (self._pending + data)[-1:] not in (b"", b"\n", b"\r"):
                    data += b"\n"
                data += fresh
        if not self._checked and (self._pending + data)[:2]:
            self._check(self._pending + data)
        return self._lines(data)

    @property
    def ino(self) -> int | None:
        """The inode of the file being read."""
        return self._ino

    def at_end(self) -> bool:
        """Whether the last read took all there was then (not a block of a backlog: a
        long log already there when following began)."""
        return not self.behind

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def flush(self) -> pl.DataFrame | None:
        """The line still being written, as a whole line (the writer is done)."""
        rest, self._pending = self._pending, b""
        return self._frame(rest) if rest else None

    def _open(self) -> bool:
        try:
            self._fh = self.path.open("rb")
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        self._ino = os.fstat(self._fh.fileno()).st_ino
        return True

    def _switch(self) -> tuple[bytes, bytes] | None:
        """After a rotation or a truncation since the last read: (the rest of the old
        file, the first bytes of the new one); None when there was neither."""
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return None  # renamed away, the new one not there yet: keep reading the old
        if now.st_ino != self._ino:
            rest = self._fh.read()  # what the writer put in before it let the old file go
            self.close()
            self.rotations += 1
            if not self._open():
                return rest, b""
            return rest, self._fh.read(READ_MAX)
        if now.st_size < self._fh.tell():  # truncated in place
            self.rotations += 1
            self._fh.seek(0)
            return b"", self._fh.read(READ_MAX)
        return None

    def _check(self, head: bytes) -> None:
        self._checked = True
        if head[:2] == _GZIP:
            raise InputError(f"{self.path}: a compressed file cannot be followed as it grows")
        if b"\x00" in head[:4096]:
            raise InputError(
                f"{self.path}: a binary file, not a text log (logbook detect reads it)"
            )

    def _lines(self, data: bytes) -> pl.DataFrame | None:
        buf = self._pending + data
        cut = _last_break(buf)
        self._pending = buf[cut:]
        return self._frame(buf[:cut]) if cut else None

    def _frame(self, raw: bytes) -> pl.DataFrame:
        frame, stats = split_lines(raw)
        frame = frame.with_columns(pl.col("line") + self.lines)
        self.lines += stats.lines
        return frame


def _last_break(buf: bytes) -> int:
    """Where the complete lines of ``buf`` end: after its last line feed, or after a
    lone carriage return (a bar redrawn in place) that is not its last byte (that one
    may be the first half of a CR LF pair still being written)."""
    lf = buf.rfind(b"\n")
    cr = buf.rfind(b"\r", 0, len(buf) - 1)
    return max(lf, cr) + 1
