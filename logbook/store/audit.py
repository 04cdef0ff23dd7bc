"""``audit``: every input read, audited and stored, on a pool of worker processes or a
Ray cluster (the same task function under both); an input seen before and unchanged is
kept as it is. Workers give back each run's row and tables; this process writes them."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from logbook.errors import UsageError
from logbook.executor import Fanout, pool_unordered
from logbook.store.index import frame, read_index, write_index
from logbook.store.inputs import Input, content_hash, expand
from logbook.store.split import SPLIT_MIB
from logbook.store.split import job as split_job
from logbook.store.task import Result, audit_input, remove_run, write_tables

_THREADS = "POLARS_MAX_THREADS"
INDEX_EVERY_S = 10.0  # the index is rewritten at most this often while an audit runs


@dataclass
class AuditSummary:
    inputs: int  # inputs given
    audited: int  # inputs read this time
    unchanged: int  # inputs kept from an earlier audit
    runs: int  # runs in the store's index for the given inputs
    failed: int  # of them, runs whose input could not be read
    seconds: float


def audit(
    patterns: list[str],
    store: str | Path,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    ray: str | None = None,
    split_mib: float = SPLIT_MIB,
) -> AuditSummary:
    """Audit every input of ``patterns`` into ``store``; ``workers`` processes (default:
    the CPU count; 1 reads in this process), or tasks on Ray when ``ray`` is an address
    (``""``: the one ``RAY_ADDRESS`` names or one running here, else a local instance of
    ``workers`` CPUs). An input of several files of at least ``split_mib`` MiB is parsed
    one task per file, then assembled. ``progress(done, total)`` after each input."""
    t0 = time.perf_counter()
    if workers is not None and workers < 1:
        raise UsageError("--workers must be >= 1")
    root = Path(store)
    if root.exists() and not root.is_dir():
        raise UsageError(f"--store {store}: is a file, not a folder")
    root.mkdir(parents=True, exist_ok=True)
    inputs = expand(patterns)
    index = read_index(root)
    kept, todo = _split(index, inputs)
    n_workers = workers if workers is not None else max(1, os.cpu_count() or 1)
    done_rows: dict[str, list[dict]] = {}
    last_write = time.perf_counter()

    def finished(inp: Input, results: list[Result]) -> None:
        nonlocal last_write
        for row, tables in results:
            write_tables(root, row["run_id"], tables)
        done_rows[inp.path] = [row for row, _ in results]
        if progress is not None:
            progress(len(done_rows), len(todo))
        if time.perf_counter() - last_write > INDEX_EVERY_S:
            _write(root, index, kept, done_rows)
            last_write = time.perf_counter()

    try:
        jobs = [split_job(inp, split_mib) for inp in todo]
        if ray is not None:
            _on_ray(todo, jobs, ray, workers, finished)
        else:
            _run_all(todo, jobs, n_workers, finished)
    finally:
        new = _write(root, index, kept, done_rows)
    mine = new.filter(pl.col("input").is_in([i.path for i in inputs]))
    return AuditSummary(
        inputs=len(inputs),
        audited=len(done_rows),
        unchanged=len(inputs) - len(todo),
        runs=mine.height,
        failed=mine.filter(pl.col("error").is_not_null()).height,
        seconds=time.perf_counter() - t0,
    )


def _split(index: pl.DataFrame, inputs: list[Input]) -> tuple[pl.DataFrame, list[Input]]:
    """(index rows kept as they are, inputs to read): an input is unchanged when its
    stamp (size, modification time) is the one indexed, or else its content hash."""
    by_input = {k[0]: g for k, g in index.group_by("input")} if index.height else {}
    keep, todo = [], []
    for inp in inputs:
        rows = by_input.get(inp.path)
        if rows is None:
            todo.append(inp)
            continue
        stamps = set(rows.get_column("stamp").to_list())
        hashes = set(rows.get_column("content_hash").to_list())
        if stamps == {inp.stamp} or (len(hashes) == 1 and content_hash(inp) in hashes):
            keep.append(inp.path)
        else:
            todo.append(inp)
    return index.filter(pl.col("input").is_in(keep)), todo


def _on_ray(todo: list[Input], jobs: list, address: str, cpus: int | None, finished) -> None:
    from logbook.executor import ray_unordered

    env = {_THREADS: os.environ.get(_THREADS, "1")}
    for i, results in ray_unordered(audit_input, jobs, address, cpus, env):
        finished(todo[i], results)


def _run_all(todo: list[Input], jobs: list, workers: int, finished) -> None:
    if not todo:
        return
    if workers == 1 or (len(todo) == 1 and not isinstance(jobs[0], Fanout)):
        for inp in todo:
            finished(inp, audit_input(inp))
        return
    # spawned, not forked: a fork of a process that runs polars' thread pool can hang;
    # one polars thread a worker (read when polars loads there): the workers share the
    # cores, rather than each pool of threads contending for all of them
    ctx = multiprocessing.get_context("spawn")
    saved = os.environ.get(_THREADS)
    os.environ.setdefault(_THREADS, "1")
    try:
        for i, results in pool_unordered(audit_input, jobs, workers, ctx):
            finished(todo[i], results)
    finally:
        if saved is None:
            os.environ.pop(_THREADS, None)


def _write(
    root: Path, index: pl.DataFrame, kept: pl.DataFrame, done: dict[str, list[dict]]
) -> pl.DataFrame:
    """The index: rows of inputs not given or unchanged, and the new rows; tables of
    runs that an input no longer has are removed (after the index no longer names them)."""
    fresh = frame([r for rows in done.values() for r in rows])
    given = set(kept.get_column("input").to_list()) | set(done)
    others = index.filter(~pl.col("input").is_in(list(given)))
    new = pl.concat([others, kept, fresh], how="vertical")
    write_index(root, new)
    stale = index.filter(pl.col("input").is_in(list(done))).get_column("run_id")
    for rid in set(stale.to_list()) - set(fresh.get_column("run_id").to_list()):
        remove_run(root, rid)
    return new


def progress_printer(stream=None) -> Callable[[int, int], None]:
    """``audited k/N inputs`` on stderr (see :func:`logbook.progress.counter`)."""
    from logbook.progress import counter

    return counter("audited {done}/{total} inputs", stream)
