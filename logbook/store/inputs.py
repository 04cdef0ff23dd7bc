"""What an audit reads: its inputs (files, directories of launch files, globs), each
with the identity that says whether it changed since the last audit."""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from logbook.errors import UsageError

_HASH_BLOCK = 1 << 22


@dataclass(frozen=True)
class Input:
    """One input: ``path`` as given (resolved), the files read for it, and its identity."""

    path: str
    files: tuple[str, ...]  # the files of a directory of launch files, or the path itself
    size: int
    mtime_ns: int

    @property
    def stamp(self) -> str:
        """Size and modification times: equal stamps mean nothing changed (cheap)."""
        return f"{self.size}:{self.mtime_ns}"


def expand(patterns: list[str]) -> list[Input]:
    """The inputs of ``patterns`` (paths, or globs that ``glob`` expands), each once, in
    the order given; a pattern that matches nothing is a usage error."""
    seen: dict[str, Input] = {}
    for pattern in patterns:
        paths = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not paths or not all(Path(p).exists() for p in paths):
            raise UsageError(f"{pattern}: no such file or directory")
        for p in paths:
            path = str(Path(p).resolve())
            if path not in seen:
                seen[path] = _input(Path(path))
    return list(seen.values())


def _input(path: Path) -> Input:
    files = (path,) if path.is_file() else tuple(_launch_files(path))
    stats = [f.stat() for f in files] or [path.stat()]
    return Input(
        path=str(path),
        files=tuple(str(f) for f in files),
        size=sum(s.st_size for s in stats),
        mtime_ns=max(s.st_mtime_ns for s in stats),
    )


def _launch_files(folder: Path) -> list[Path]:
    """Every regular file under a directory (hidden ones left out), in path order."""
    out = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [Path(root) / n for n in sorted(names) if not n.startswith(".")]
    return [p for p in out if p.is_file()]


def content_hash(inp: Input) -> str:
    """SHA-256 over the input's files (their paths relative to it, and their bytes)."""
    h = hashlib.sha256()
    base = Path(inp.path)
    for f in inp.files:
        h.update(str(Path(f).relative_to(base) if f != inp.path else Path(f).name).encode())
        with open(f, "rb") as fh:
            while block := fh.read(_HASH_BLOCK):
                h.update(block)
    return h.hexdigest()
