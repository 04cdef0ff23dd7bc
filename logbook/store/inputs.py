"""What an audit reads: its inputs (files, directories of launch files, globs, and
``s3://``, ``gs://``, ``az://`` URLs through fsspec), each with the identity that says
whether it changed since the last audit."""

from __future__ import annotations

import glob
import hashlib
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from logbook.errors import InputError, UsageError

_HASH_BLOCK = 1 << 22
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# fields of an fsspec ``info`` that tell when an object last changed, by backend
_MODIFIED = ("LastModified", "mtime", "updated", "last_modified", "modified", "created")
_VERSION = ("ETag", "etag", "md5Hash", "generation", "version_id", "crc32c")


@dataclass(frozen=True)
class Input:
    """One input: ``path`` as given (resolved; a URL stays a URL), the files read for
    it, and its identity."""

    path: str
    files: tuple[str, ...]  # the files of a directory of launch files, or the path itself
    size: int
    mtime_ns: int
    tag: str = ""  # an object store's version of the files (ETags), where it gives one

    @property
    def stamp(self) -> str:
        """Size and modification times: equal stamps mean nothing changed (cheap)."""
        return f"{self.size}:{self.mtime_ns}" + (f":{self.tag}" if self.tag else "")

    @property
    def remote(self) -> bool:
        return is_url(self.path)


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL read through fsspec (``file://`` is a local path)."""
    return bool(_URL.match(path)) and not path.startswith("file://")


def expand(patterns: list[str]) -> list[Input]:
    """The inputs of ``patterns`` (paths, or globs that ``glob`` expands), each once, in
    the order given; a pattern that matches nothing is a usage error."""
    seen: dict[str, Input] = {}
    for pattern in patterns:
        if pattern.startswith("file://"):
            pattern = pattern[len("file://") :]
        if is_url(pattern):
            for inp in _remote(pattern):
                seen.setdefault(inp.path, inp)
            continue
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


def filesystem(url: str):
    """(fsspec filesystem, path within it) of a URL; a usage error naming what to
    install when fsspec or the backend of its scheme is missing."""
    try:
        import fsspec
    except ImportError:
        raise UsageError(
            f"{url}: reading URLs needs fsspec: pip install 'trainlogbook[remote]'"
        ) from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{url}: {first}") from None


def _remote(pattern: str) -> list[Input]:
    fs, path = filesystem(pattern)
    try:
        paths = sorted(fs.glob(path)) if glob.has_magic(path) else [path]
        paths = [p for p in paths if fs.exists(p)]
        if not paths:
            raise UsageError(f"{pattern}: no such file or directory")
        return [_remote_input(fs, p) for p in paths]
    except OSError as exc:
        raise UsageError(f"{pattern}: cannot list ({exc})") from None


def _remote_input(fs, path: str) -> Input:
    if fs.isdir(path):
        found = fs.find(path, detail=True)
        infos = [
            i
            for name, i in sorted(found.items())
            if i.get("type", "file") == "file"
            and not any(part.startswith(".") for part in name[len(path) :].split("/") if part)
        ]
    else:
        infos = [fs.info(path)]
    url = fs.unstrip_protocol(path)
    versions = [str(next((i[k] for k in _VERSION if i.get(k)), "")) for i in infos]
    tag = hashlib.sha1("|".join(versions).encode()).hexdigest()[:16] if any(versions) else ""
    return Input(
        path=url,
        files=tuple(fs.unstrip_protocol(i["name"]) for i in infos),
        size=sum(int(i.get("size") or 0) for i in infos),
        mtime_ns=max((_ns(i) for i in infos), default=0),
        tag=tag,
    )


def _ns(info: dict) -> int:
    for k in _MODIFIED:
        v = info.get(k)
        if v is None:
            continue
        if isinstance(v, datetime):
            return int(v.timestamp() * 1e9)
        if isinstance(v, int | float):
            return int(v * 1e9) if v < 1e12 else int(v)
        try:
            return int(datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp() * 1e9)
        except ValueError:
            continue
    return 0


def relative(inp: Input, f: str) -> str:
    """A file's name within its input (its base name when the input is the file)."""
    if f == inp.path:
        return f.rsplit("/", 1)[-1] if inp.remote else Path(f).name
    if inp.remote:
        return f[len(inp.path) :].lstrip("/")
    return str(Path(f).relative_to(inp.path))


def open_bytes(path: str):
    """A binary file object of a local path or a URL."""
    if not is_url(path):
        return open(path, "rb")
    fs, p = filesystem(path)
    try:
        return fs.open(p, "rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None


def file_hash(path: str) -> str:
    """SHA-256 of one file's bytes (local path or URL)."""
    h = hashlib.sha256()
    with open_bytes(path) as fh:
        while block := fh.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def combined_hash(inp: Input, hashes: list[str]) -> str:
    """The input's hash from its files' (their names within it, each file's SHA-256):
    the same whether its files were hashed together or apart."""
    h = hashlib.sha256()
    for f, fh in zip(inp.files, hashes, strict=True):
        h.update(f"{relative(inp, f)}\0{fh}\n".encode())
    return h.hexdigest()


def content_hash(inp: Input) -> str:
    """SHA-256 over the input's files: their names relative to it and their own hashes."""
    return combined_hash(inp, [file_hash(f) for f in inp.files])
