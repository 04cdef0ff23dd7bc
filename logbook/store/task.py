"""The audit of one input: read its runs, detect, write each run's tables, give the
index rows. Module-level and given plain values: it runs in worker processes."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections import Counter
from pathlib import Path

import polars as pl

from logbook.atomic import atomic_path
from logbook.errors import InputError, UsageError
from logbook.store.index import TABLES, partition
from logbook.store.inputs import Input, content_hash


def run_id(input_path: str, index: int) -> str:
    """The id of the ``index``-th run of an input (stable across audits)."""
    return hashlib.sha1(f"{input_path}#{index}".encode()).hexdigest()[:16]


def audit_input(inp: Input, store: str) -> list[dict]:
    """Index rows of every run of ``inp`` (its tables written under ``store``); one row
    with ``error`` set when the input cannot be read."""
    from parsers import read_logs

    t0 = time.perf_counter()
    base = {
        "input": inp.path,
        "sources": list(inp.files),
        "stamp": inp.stamp,
        "content_hash": content_hash(inp),
    }
    try:
        paths = [inp.path] if _whole(inp) else list(inp.files)
        if not paths:
            raise InputError(f"{inp.path}: an empty directory")
        runs = read_logs(paths)
    except Exception as exc:  # (recorded with the input, never stopping the audit)
        return [{**base, "run_id": run_id(inp.path, 0), "error": _why(exc), **_took(t0)}]
    rows = []
    for i, run in enumerate(runs):
        rid = run_id(inp.path, i)
        try:
            rows.append({**base, **_audit_run(run, Path(store), rid, i), **_took(t0)})
        except Exception as exc:
            rows.append({**base, "run_id": rid, "error": _why(exc), **_took(t0)})
    return rows


def _why(exc: Exception) -> str:
    if isinstance(exc, InputError | UsageError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc}"


def _whole(inp: Input) -> bool:
    """Whether the input is read as one path (a file, or a folder its format reads)."""
    p = Path(inp.path)
    if p.is_file():
        return True
    from parsers import FORMATS

    return any(hasattr(m, "sniff_path") and m.sniff_path(p) > 0 for m in FORMATS.values())


def _took(t0: float) -> dict:
    return {"seconds": round(time.perf_counter() - t0, 4)}


def _audit_run(run, store: Path, rid: str, index: int) -> dict:
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
    tables = {"metrics": m, "events": events, "findings": findings.to_frame()}
    for table in TABLES:
        target = partition(store, table, rid)
        with atomic_path(target) as tmp:
            tables[table].write_parquet(tmp)
    g = account(run)
    return {
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
        "caveats": list(run.meta.caveats),
        "error": None,
    }


def tally_of(tally: Counter, severity: str) -> int:
    return sum(n for (_, sev), n in tally.items() if sev == severity)


def remove_run(store: Path, rid: str) -> None:
    """The tables of a run no longer in the store's index."""
    for table in TABLES:
        shutil.rmtree(partition(store, table, rid).parent, ignore_errors=True)
