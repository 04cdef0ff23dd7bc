"""The runs of a run store, read back for their reports: each with its stored findings.

A run's report needs its header too (its name as parsed, the source files that the
metrics' ``source`` column numbers, unit conversions, the parse accounting), which the
store does not keep: metrics and events round-trip through the store's tables, the
header does not. So a run whose input is at hand and unchanged since the audit (same
size and modification time, or else the same content hash) is read again, parse only:
its findings are the stored ones, the detectors do not run again. Its report is then
the one ``logbook report INPUT`` writes. A run whose input has changed, is gone or is a
URL is rebuilt from the store's metrics and events tables, with the header that the
index row gives (name, format, files, caveats) and a caveat that says so.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import polars as pl

from logbook.errors import InputError
from logbook.event_table import COMMON
from logbook.findings import Findings
from logbook.run import Run, RunMeta
from logbook.schema import EventBase, Finding, event_from_dict
from logbook.store.index import partition

REBUILT = (
    "report rebuilt from the run store's tables (the input has changed since the audit, "
    "or is not at hand): the header's unit conversions and unrecognized-line count are "
    "not shown"
)


class StoredRuns:
    """Reads the store's runs back, one index row at a time; the runs of one input are
    read from it once (give the rows of an input one after the other)."""

    def __init__(self, store: Path) -> None:
        self.store = Path(store)
        self._input = ""
        self._runs: list[Run] | None = None

    def read(self, row: dict) -> tuple[Run, Findings, str]:
        """``(run, findings, how)`` of an index row: ``how`` is ``"input"`` (read again)
        or ``"tables"`` (rebuilt); :class:`InputError` when its tables are unreadable."""
        if row["input"] != self._input:
            self._input, self._runs = row["input"], _read_again(row)
        findings = stored_findings(self.store, row["run_id"])
        run = _pick(self._runs, row) if self._runs is not None else None
        if run is not None:
            return run, findings, "input"
        return from_tables(self.store, row), findings, "tables"


def _read_again(row: dict) -> list[Run] | None:
    """Every run of the row's input, when it is a local input unchanged since the
    audit; else None."""
    from logbook.store.inputs import content_hash, expand, is_url

    path = row["input"]
    if is_url(path) or not Path(path).exists():  # (a URL: not fetched again)
        return None
    try:
        inp = expand([glob.escape(path)])[0]
        if inp.stamp != row["stamp"] and content_hash(inp) != row["content_hash"]:
            return None
        from logbook.store.task import whole_input
        from parsers import read_logs

        return read_logs([inp.path] if whole_input(inp) else list(inp.files))
    except Exception:  # (any failure to read it again: the tables are the audited record)
        return None


def _pick(runs: list[Run], row: dict) -> Run | None:
    """The run of ``runs`` the row is (its place in the input, as its id tells), when it
    still has the records the audit counted."""
    from logbook.store.task import run_id

    for i, run in enumerate(runs):
        if run_id(row["input"], i) == row["run_id"]:
            return run if run.metrics.height == row["records"] else None
    return None


def _table(store: Path, table: str, rid: str) -> pl.DataFrame:
    path = partition(store, table, rid)
    try:
        return pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(f"{path}: not a readable table of the store ({first})") from None


def stored_findings(store: Path, rid: str) -> Findings:
    """A run's findings as the audit stored them (ids and precursor links kept)."""
    out = Findings()
    for r in _table(store, "findings", rid).to_dicts():
        r["evidence"] = json.loads(r["evidence"]) if r.get("evidence") else {}
        out.append(Finding.model_validate({k: v for k, v in r.items() if v is not None}))
    return out


def stored_events(store: Path, rid: str) -> list[EventBase]:
    """A run's events from its events table: the common columns, the source, and the
    kind's own fields from ``detail`` (the typed columns beside it repeat them)."""
    out = []
    for r in _table(store, "events", rid).to_dicts():
        data = {c: r[c] for c in COMMON if r.get(c) is not None}
        if r.get("file") is not None or r.get("line") is not None:
            data["source"] = {"file": r.get("file"), "line": r.get("line")}
        data.update(json.loads(r["detail"]) if r.get("detail") else {})
        out.append(event_from_dict(data))
    return out


def from_tables(store: Path, row: dict) -> Run:
    """A run from the store's metrics and events tables, its header from the index row."""
    rid = row["run_id"]
    meta = RunMeta(
        name=row["run"],
        format=row["format"],
        sources=list(row["sources"] or []),
        caveats=[*(row["caveats"] or []), REBUILT],
    )
    return Run(metrics=_table(store, "metrics", rid), events=stored_events(store, rid), meta=meta)
