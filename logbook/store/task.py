"""The audit of one input: read its runs, detect, and give each run's index row and
tables (as Parquet bytes, which the audit writes into the store). Module-level and given
plain values: it runs in worker processes, local or on a Ray cluster, so a worker needs
no access to the store, and a task run again after its worker died writes nothing twice."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from logbook.atomic import atomic_path
from logbook.errors import InputError, UsageError
from logbook.store.index import TABLES, partition
from logbook.store.inputs import Input, combined_hash, content_hash, open_bytes, relative

_COPY_BLOCK = 1 << 24  # bytes of a remote file read at a time

# one run of an input: its index row, and its tables as Parquet bytes (none on an error)
Result = tuple[dict, dict[str, bytes]]


def run_id(input_path: str, index: int) -> str:
    """The id of the ``index``-th run of an input (stable across audits)."""
    return hashlib.sha1(f"{input_path}#{index}".encode()).hexdigest()[:16]


def audit_input(inp: Input) -> list[Result]:
    """The index row and tables of every run of ``inp``; one row with ``error`` set (and
    no tables) when the input cannot be read."""
    from parsers import read_logs

    t0 = time.perf_counter()
    try:
        with _local_copy(inp) as (local, digest):

            def read() -> list:
                paths = [local.path] if whole_input(local) else list(local.files)
                if not paths:
                    raise InputError(f"{inp.path}: an empty directory")
                return read_logs(paths)

            return audited(inp, digest, read, _renamer(local.path, inp.path), t0)
    except InputError as exc:  # a remote input that could not be fetched
        return [failed(inp, str(exc), t0)]


def base_row(inp: Input, digest: str | None) -> dict:
    return {"input": inp.path, "sources": list(inp.files), "stamp": inp.stamp,
            "content_hash": digest}  # fmt: skip


def failed(inp: Input, error: str, t0: float, digest: str | None = None) -> Result:
    """The one row of an input that could not be read."""
    row = {**base_row(inp, digest), "run_id": run_id(inp.path, 0), "error": error}
    return {**row, **_took(t0)}, {}


def audited(inp: Input, digest: str, read, named=None, t0: float = 0.0) -> list[Result]:
    """The rows and tables of the runs ``read()`` gives (an error it raises is the
    input's row); ``named`` tells local copies' file names as the input's."""
    named = named or _renamer(inp.path, inp.path)
    base = base_row(inp, digest)
    try:
        runs = read()
    except Exception as exc:  # (recorded with the input, never stopping the audit)
        return [failed(inp, named(why(exc)), t0, digest)]
    out: list[Result] = []
    for i, run in enumerate(runs):
        rid = run_id(inp.path, i)
        try:
            row, tables = _audit_run(run, rid, i, named)
            out.append(({**base, **row, **_took(t0)}, tables))
        except Exception as exc:
            out.append(({**base, "run_id": rid, "error": why(exc), **_took(t0)}, {}))
    return out


@contextlib.contextmanager
def _local_copy(inp: Input) -> Iterator[tuple[Input, str]]:
    """(the input as local files, its content hash). A remote input's files are streamed
    into a temp folder (in slices, hashed on the way; the folder removed after), keeping
    their names, which some formats are told by."""
    if not inp.remote:
        yield inp, content_hash(inp)
        return
    with tempfile.TemporaryDirectory(prefix="logbook-audit-") as tmp:
        files, hashes = [], []
        for f in inp.files:
            target = Path(tmp) / "input" / relative(inp, f)
            target.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            try:
                with open_bytes(f) as src, open(target, "wb") as dst:
                    while block := src.read(_COPY_BLOCK):
                        h.update(block)
                        dst.write(block)
            except OSError as exc:
                raise InputError(f"{f}: cannot read ({exc})") from None
            files.append(str(target))
            hashes.append(h.hexdigest())
        folder = Path(tmp) / "input"
        folder.mkdir(exist_ok=True)
        single = len(inp.files) == 1 and inp.files[0] == inp.path
        path = files[0] if single else str(folder)
        local = Input(path=path, files=tuple(files), size=inp.size, mtime_ns=inp.mtime_ns)
        yield local, combined_hash(inp, hashes)


@dataclass(frozen=True)
class _Renamer:
    """Names of the local copy's files told as the input's (its URL)."""

    local: str
    given: str

    def __call__(self, s: str) -> str:
        return s.replace(self.local, self.given) if self.local != self.given else s

    def column(self, df: pl.DataFrame, name: str) -> pl.DataFrame:
        if self.local == self.given or name not in df.columns:
            return df
        return df.with_columns(pl.col(name).str.replace(self.local, self.given, literal=True))


def _renamer(local: str, given: str) -> _Renamer:
    return _Renamer(local, given.rstrip("/") if local != given else given)


def why(exc: Exception) -> str:
    if isinstance(exc, InputError | UsageError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc}"


def whole_input(inp: Input) -> bool:
    """Whether the input is read as one path (a file, or a folder its format reads)."""
    p = Path(inp.path)
    if p.is_file():
        return True
    from parsers import FORMATS

    return any(hasattr(m, "sniff_path") and m.sniff_path(p) > 0 for m in FORMATS.values())


def _took(t0: float) -> dict:
    return {"seconds": round(time.perf_counter() - t0, 4)}


def _audit_run(run, rid: str, index: int, named: _Renamer) -> tuple[dict, dict]:
    from logbook.cli_runs import run_name
    from logbook.detectors import detect
    from logbook.event_table import events_frame
    from logbook.findings import Findings
    from logbook.report.goodput import account

    findings = Findings(detect(run))
    m = run.metrics
    steps = m.get_column("step").drop_nulls() if "step" in m.columns else pl.Series([])
    restarts = run.events_of("restart")
    tally = Counter((f.kind, f.severity) for f in findings)
    incidents: dict[str, dict[str, int]] = {}
    for (kind, sev), n in sorted(tally.items()):
        incidents.setdefault(kind, {})[sev] = n
    order = {"info": 0, "warning": 1, "critical": 2}
    alarms = [f for f in findings if f.severity != "info"]
    worst = max(alarms, key=lambda f: (order[f.severity], -(f.step or 0)), default=None)
    events = events_frame(run.events).with_columns(
        pl.Series("cause", [getattr(e, "cause", None) for e in run.events], pl.String),
        pl.Series("lost_steps", [getattr(e, "lost_steps", None) for e in run.events], pl.Int64),
        pl.Series("resume_step", [getattr(e, "resume_step", None) for e in run.events], pl.Int64),
        pl.Series("count", [getattr(e, "count", None) for e in run.events], pl.Int64),
    )
    events = named.column(events, "file")
    tables = {"metrics": m, "events": events, "findings": findings.to_frame()}
    g = account(run)
    row = {
        "run_id": rid,
        "run": run_name(run, index),
        "format": run.meta.format,
        "records": m.height,
        "first_step": int(steps.min()) if steps.len() else None,
        "last_step": int(steps.max()) if steps.len() else None,
        "segments": int(m.get_column("segment").n_unique()) if m.height else 0,
        "restarts": len(restarts),
        "lost_steps": sum(e.lost_steps or 0 for e in restarts),
        "goodput": g.goodput if not g.wall_estimated else None,
        "critical": tally_of(tally, "critical"),
        "warning": tally_of(tally, "warning"),
        "info": tally_of(tally, "info"),
        "worst": f"{worst.severity} {worst.kind} at {worst.step}" if worst else None,
        "incidents": json.dumps(incidents, sort_keys=True),
        "caveats": [named(c) for c in run.meta.caveats],
        "error": None,
    }
    return row, {t: _parquet(tables[t]) for t in TABLES}


def _parquet(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


def write_tables(store: Path, rid: str, tables: dict[str, bytes]) -> None:
    """A run's tables into the store, each file written whole and renamed."""
    for table, data in tables.items():
        with atomic_path(partition(store, table, rid)) as tmp:
            Path(tmp).write_bytes(data)


def tally_of(tally: Counter, severity: str) -> int:
    return sum(n for (_, sev), n in tally.items() if sev == severity)


def remove_run(store: Path, rid: str) -> None:
    """The tables of a run no longer in the store's index."""
    for table in TABLES:
        shutil.rmtree(partition(store, table, rid).parent, ignore_errors=True)
