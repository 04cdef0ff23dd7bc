"""Atomic file writes: write a temp file beside the target, then rename over it.

The target gets the mode a plain ``open`` would give it (``0666`` less the umask), or
keeps the mode it had; a target that is a symlink is written through (the file it
points to is replaced, the link stays). Temp files are removed on any error, on
SIGINT/SIGTERM (the command line turns both into exceptions), and, for a process that
was killed outright, by the next write to the same path: temp names carry the writer's
process id, and those of processes that are gone are stale.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from logbook.errors import InputError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path in the target's folder; rename it to ``path`` on success."""
    target = _through_links(Path(path))
    parent = next((p for p in target.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InputError(f"{path}: cannot write ({parent} is a file, not a folder)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(target)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent
        )
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, InputError):
            raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
        raise


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Open a temp file for writing; it replaces ``path`` when the block succeeds."""
    with atomic_path(path) as tmp, open(tmp, mode) as fh:
        yield fh


def require_folder(path: str | Path) -> None:
    """A usage error when the folder ``path`` would be written into does not exist: an
    output names a file in a folder that is there (a typo in a folder name is not
    silently made into a new tree of folders)."""
    from logbook.errors import UsageError

    folder = Path(path).parent
    if not folder.exists():
        raise UsageError(f"output {path}: folder {folder} does not exist (create it first)")
    if not folder.is_dir():
        raise UsageError(f"output {path}: {folder} is a file, not a folder")


def _through_links(target: Path) -> Path:
    """The file a symlinked target points to (followed to the end), else the target."""
    if target.is_symlink():
        return Path(os.path.realpath(target))
    return target


def _mode_for(target: Path) -> int:
    """The permission bits the written file gets: those of the file it replaces, else
    what ``open`` would create under the current umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _remove_stale(target: Path) -> None:
    """Temp files of ``target`` left by writers that were killed (their process is
    gone)."""
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(\d+)\..+\.tmp$")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        if m is None or _alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(target.parent / name)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's process, or not ours to judge
    return True
