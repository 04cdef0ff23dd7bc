"""Where independent tasks run: in this process, on a pool of local processes, or on a
Ray cluster (``--ray``), given the same module-level task functions under each. A job is
the argument of the task function, or a :class:`Fanout`: a stage over several items side
by side (the files of a large input), then one task over their results.

``--ray`` alone connects to the cluster that ``RAY_ADDRESS`` names, or to one started on
this machine with ``ray start --head``; with no cluster to join it starts a local Ray
instance of ``--workers`` CPUs (default: the CPU count) for the command and stops it
after. ``--ray ADDRESS`` (``host:port``, ``ray://host:port``, ``auto`` or ``local``)
names the cluster. Every node needs logbook installed (the same version), and the inputs
where every node reads them (a shared filesystem, or ``s3://``/``gs://``/``az://`` URLs).

Tasks are retried by Ray when the worker running them dies (``MAX_RETRIES``); a task
that raises is not retried: the audit records the error with its run.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from logbook.errors import UsageError

ENV = "RAY_ADDRESS"
MAX_RETRIES = 3  # a task is run again this often when the worker running it dies
IN_FLIGHT_PER_CPU = 2  # tasks given to the cluster ahead of results, per CPU
LOCAL = "local"  # --ray local: always a local instance, even when a cluster runs here
# what follows --ray as its address (a log path or URL never looks like one)
ADDRESS = re.compile(r"^(auto|local|ray://\S+|\[?[\w.:-]*[\w\]]:\d{1,5})$")
CONNECT_TIMEOUT_S = 5.0  # a cluster address that takes no connection within this is down
TOKEN_HINT = (
    "the cluster asks for a token: set RAY_AUTH_MODE=token, with the cluster's token in "
    "~/.ray/auth_token or RAY_AUTH_TOKEN"
)


@dataclass(frozen=True)
class Fanout:
    """A job in two stages: ``each(item)`` for every item, side by side, then
    ``then(head, *their results)``, whose result is the job's."""

    each: Callable
    items: tuple
    then: Callable
    head: Any


def run_here(fn: Callable, job: Any) -> Any:
    """One job, in this process."""
    if isinstance(job, Fanout):
        return job.then(job.head, *[job.each(x) for x in job.items])
    return fn(job)


def pool_unordered(fn: Callable, jobs: list, workers: int, mp_context) -> Iterator[tuple[int, Any]]:
    """``(i, result)`` of every job as it finishes on a pool of ``workers`` processes; at
    most ``IN_FLIGHT_PER_CPU`` tasks a worker are queued at a time."""
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=mp_context) as pool:
        pending: dict[Future, tuple[int, int]] = {}  # future -> (job, item; -1: the job)
        parts: dict[int, dict[int, Any]] = {}
        queue = list(range(len(jobs)))[::-1]
        while queue or pending:
            while queue and len(pending) < IN_FLIGHT_PER_CPU * workers:
                i = queue.pop()
                job = jobs[i]
                if isinstance(job, Fanout) and job.items:
                    parts[i] = {}
                    for k, x in enumerate(job.items):
                        pending[pool.submit(job.each, x)] = (i, k)
                elif isinstance(job, Fanout):
                    pending[pool.submit(job.then, job.head)] = (i, -1)
                else:
                    pending[pool.submit(fn, job)] = (i, -1)
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in done:
                i, k = pending.pop(fut)
                if k < 0:
                    yield i, fut.result()
                    continue
                parts[i][k] = fut.result()
                job = jobs[i]
                if len(parts[i]) == len(job.items):  # every item in: the job's own task
                    got = parts.pop(i)
                    args = [got[n] for n in range(len(got))]
                    pending[pool.submit(job.then, job.head, *args)] = (i, -1)


def ray_argv(args: list[str]) -> list[str]:
    """``--ray [ADDRESS]`` on the command line, as the options the commands declare:
    ``--ray ADDRESS`` and ``--ray=ADDRESS`` become ``--ray-address ADDRESS``; ``--ray``
    followed by anything else (or nothing) stays the flag."""
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out += args[i:]
            break
        if a.startswith("--ray="):
            out += ["--ray-address", a.split("=", 1)[1]]
        elif a == "--ray" and i + 1 < len(args) and ADDRESS.match(args[i + 1]):
            out += ["--ray-address", args[i + 1]]
            i += 1
        else:
            out.append(a)
        i += 1
    return out


def wanted(flag: bool, address: str | None, workers_given: bool) -> str | None:
    """The Ray address to run on (``""``: find or start one), or None for the local
    pool: ``--ray``/``--ray ADDRESS`` given, or ``RAY_ADDRESS`` set and no ``--workers``."""
    if address:
        return address
    if flag:
        return ""
    if os.environ.get(ENV) and not workers_given:
        return os.environ[ENV]
    return None


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UsageError(
            "--ray needs Ray: pip install 'trainlogbook[ray]' (or pip install ray)"
        ) from None
    return ray


@contextmanager
def session(address: str, cpus: int | None, env: dict[str, str] | None = None) -> Iterator[Any]:
    """Ray, connected: to ``address``; for ``""`` to ``RAY_ADDRESS`` or a cluster on this
    machine, else a local instance of ``cpus`` CPUs started here (and stopped after).
    ``env``: environment variables of the task workers. Yields the ``ray`` module."""
    ray = _import_ray()
    if ray.is_initialized():  # (a caller that connected itself)
        yield ray
        return
    opts: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.ERROR,
    }
    if env:  # (a runtime environment of its own: workers started for it, not reused)
        opts["runtime_env"] = {"env_vars": dict(env)}
    if address not in ("", LOCAL, "auto"):
        _reachable(address)
    with _captured_stderr() as said:
        try:
            if address == LOCAL:
                ray.init(address="local", num_cpus=cpus, **opts)
            elif address:
                ray.init(address=address, **opts)
            else:
                try:
                    ray.init(address="auto", **opts)
                except ConnectionError:
                    ray.init(address="local", num_cpus=cpus, **opts)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = address or os.environ.get(ENV) or "a local instance"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            hint = f"; {TOKEN_HINT}" if "Unauthenticated" in said() else ""
            raise UsageError(f"--ray {where}: cannot connect ({first}{hint})") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _reachable(address: str) -> None:
    """A cluster address that takes no TCP connection is a usage error now (Ray itself
    would retry for minutes)."""
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                      CONNECT_TIMEOUT_S):  # fmt: skip
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise UsageError(f"--ray {address}: cannot connect ({why})") from None


@contextmanager
def _captured_stderr() -> Iterator[Callable[[], str]]:
    """What Ray's native code writes to stderr while connecting (it retries with a line
    a second) goes to a temp file; yields a function that reads it."""
    try:
        saved = os.dup(2)
    except OSError:  # (no stderr to redirect)
        yield lambda: ""
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)

        def said() -> str:
            tmp.seek(0)
            return tmp.read().decode("utf-8", "replace")

        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def cluster_cpus(ray) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def ray_unordered(
    fn: Callable, jobs: list, address: str, cpus: int | None = None, env=None
) -> Iterator[tuple[int, Any]]:
    """``(i, fn(jobs[i]))`` as each task finishes on the cluster. A bounded number of
    tasks is in flight (``IN_FLIGHT_PER_CPU`` per cluster CPU), so results are taken as
    they come rather than held in the object store; a task whose worker died is run
    again (``MAX_RETRIES``); a task that raised raises here."""
    if not jobs:
        return
    with session(address, cpus, env) as ray:
        remote: dict[Callable, Any] = {}

        def task(f: Callable):
            if f not in remote:
                remote[f] = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(f)
            return remote[f]

        def submit(job):
            if isinstance(job, Fanout):  # the items' results go to the job's task as refs
                refs = [task(job.each).remote(x) for x in job.items]
                return task(job.then).remote(job.head, *refs)
            return task(fn).remote(job)

        window = IN_FLIGHT_PER_CPU * cluster_cpus(ray)
        todo = list(range(len(jobs)))[::-1]
        pending: dict[Any, int] = {}
        try:
            while todo or pending:
                while todo and len(pending) < window:
                    i = todo.pop()
                    pending[submit(jobs[i])] = i
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    yield i, _get(ray, ref)
        finally:
            for ref in pending:  # (stopped early: an error, or the caller went away)
                ray.cancel(ref, force=True)


def _get(ray, ref):
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # the task's own exception, as raised
        raise (exc.cause or exc) from None


def ray_map(fn: Callable, jobs: list, address: str, cpus: int | None = None, env=None) -> list:
    """``fn`` over all jobs on Ray; results in job order."""
    results: dict[int, Any] = {}
    for i, r in ray_unordered(fn, jobs, address, cpus, env):
        results[i] = r
    return [results[i] for i in range(len(jobs))]
