"""A large input of several files, audited as several tasks: each file parsed (and
hashed) by a task of its own, side by side, then one task assembles the parts into the
input's runs, as ``read_logs`` would, and audits them. Module-level and given plain
values, as :mod:`logbook.store.task`: they run in worker processes, local or on Ray."""

from __future__ import annotations

import time
from dataclasses import dataclass

from logbook.executor import Fanout
from logbook.store.inputs import Input, combined_hash, file_hash
from logbook.store.task import Result, audited, failed, whole_input, why

SPLIT_MIB = 256  # default: an input of several files of at least this many MiB is split


@dataclass
class FileParts:
    """One file of an input, parsed: its hash, its parts (None: a file only ``read_logs``
    reads, a logbook file or a chronicle), or why it could not be read."""

    hash: str | None
    parts: list | None
    error: str | None
    seconds: float


def parse_file(path: str) -> FileParts:
    """Hash and parse one file of an input."""
    from parsers import file_parts

    t0 = time.perf_counter()
    try:
        digest = file_hash(path)
        parts = file_parts(path)
    except Exception as exc:  # (the input's error, told by the task that assembles)
        return FileParts(None, None, why(exc), time.perf_counter() - t0)
    return FileParts(digest, parts, None, time.perf_counter() - t0)


def audit_files(inp: Input, *files: FileParts) -> list[Result]:
    """The runs of an input from its files' parts (the audit of :func:`audit_input`)."""
    from logbook.gc_pause import paused_gc
    from parsers import assemble_runs, read_logs

    t0 = time.perf_counter() - sum(f.seconds for f in files)
    errors = [f.error for f in files if f.error is not None]
    if errors:
        return [failed(inp, errors[0], t0)]
    digest = combined_hash(inp, [f.hash for f in files])

    def read() -> list:
        if any(f.parts is None for f in files):
            return read_logs(list(inp.files))
        with paused_gc():
            return assemble_runs([p for f in files for p in f.parts])

    return audited(inp, digest, read, t0=t0)


def split(inp: Input, min_mib: float) -> bool:
    """Whether ``inp`` is audited file by file: a local folder of several launch files,
    at least ``min_mib`` MiB in all, that no format reads as one path."""
    return (
        not inp.remote
        and len(inp.files) > 1
        and inp.size >= min_mib * 2**20
        and not whole_input(inp)
    )


def job(inp: Input, min_mib: float):
    """The job of an input: itself (one task), or a fan-out over its files."""
    return Fanout(parse_file, inp.files, audit_files, inp) if split(inp, min_mib) else inp
