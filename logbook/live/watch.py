"""The logs of one run followed together: files, and directories where launches appear.

A :class:`Watch` holds a :class:`~logbook.live.stream.LiveSource` per file. A directory
given is listed again at every poll: a file that appears in it is the log of a new
launch (stitched after the others, as ``read_log`` stitches a run's files), unless it
replaces one followed (``train.log`` rotated to ``train.log.1`` and a new ``train.log``
started): that is the same log going on. Files that are not logs (a hidden file, a
checkpoint, a figure) are left out.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from logbook.errors import InputError
from logbook.live.detector import LiveDetector
from logbook.live.stream import LiveParser, LiveSource, live_run
from logbook.run import Run
from logbook.schema import Finding

# names in a watched directory that are not logs
SKIP_SUFFIXES = (
    ".gz", ".zip", ".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".npy", ".npz", ".png",
    ".jpg", ".svg", ".pdf", ".html", ".parquet", ".lock", ".tmp", ".swp", ".pkl", ".json",
)  # fmt: skip
KEEP_FACTOR = 2  # each file keeps this many windows of its last records


class Watch:
    """Logs of one run, followed (see the module docstring)."""

    def __init__(self, paths: list[Path], fmt: str | None, detector: LiveDetector) -> None:
        self.detector = detector
        self.fmt = fmt
        self.sources: list[LiveSource] = []
        self.dirs: list[Path] = []
        self._inodes: dict[int, LiveSource] = {}
        self.skipped: list[Path] = []  # files of a directory that hold no training log
        for p in paths:
            if p.is_dir():
                self.dirs.append(p)
            elif p.exists() or p.parent.is_dir():
                self._add(p)
            else:
                raise InputError(f"{p}: no such file, and its folder does not exist")
        self._scan()

    @property
    def records(self) -> int:
        return sum(s.parser.records for s in self.sources)

    def poll(self) -> int:
        """Read what every log appended (and the files new in the directories); the
        new records."""
        self._scan()
        new = 0
        for s in self.sources:
            new += self._poll(s)
        return new

    def caught_up(self) -> bool:
        return all(s.caught_up() for s in self.sources)

    def check(self, final: bool = False) -> list[Finding]:
        """The findings new since the last check."""
        found = self.detector.update(self.run(), final=final, records=self.records)
        for s in self.sources:
            s.parser.trim(KEEP_FACTOR * self.detector.window)
        return found

    def finish(self) -> list[Finding]:
        """The writers are done: the lines still cut count, every open finding is
        reported."""
        for s in self.sources:
            s.finish()
        return self.check(final=True)

    def run(self) -> Run:
        return live_run([s.parser for s in self.sources])

    def parsers(self) -> list[LiveParser]:
        return [s.parser for s in self.sources]

    def _poll(self, s: LiveSource) -> int:
        if s.path in self.skipped:
            return 0
        try:
            new = s.poll()
            if s.follower.ino is not None:
                self._inodes[s.follower.ino] = s
            return new
        except InputError:
            if not any(s.path.parent == d for d in self.dirs):
                raise
            self.skipped.append(s.path)  # a file of a directory that is no log
            return 0

    def _add(self, p: Path) -> None:
        src = LiveSource(p, self.fmt)
        self.sources.append(src)
        with contextlib.suppress(FileNotFoundError):
            self._inodes[os.stat(p).st_ino] = src

    def _scan(self) -> None:
        for d in self.dirs:
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError as exc:
                raise InputError(f"{d}: cannot list ({exc.strerror or exc})") from None
            for e in entries:
                if e.name.startswith(".") or e.name.lower().endswith(SKIP_SUFFIXES):
                    continue
                try:
                    if not e.is_file():
                        continue
                    ino = e.inode()
                except OSError:
                    continue
                if ino in self._inodes:
                    continue  # followed, maybe renamed since (rotated away)
                if any(s.path == Path(e.path) for s in self.sources):
                    continue  # a rotated file's successor: its follower reads it next
                self._add(Path(e.path))
