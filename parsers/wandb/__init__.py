"""Weights & Biases exports: run-history Parquet, history CSV, chart CSV.

- **History Parquet** (the run's ``history`` artifact, or ``run.history()`` written with
  ``to_parquet``): one row per ``wandb.log`` call, columns ``_step``, ``_runtime``,
  ``_timestamp`` and the logged keys. ``line`` is the row number (1-based).
- **History CSV** (``run.history().to_csv()``, a ``scan_history`` dump): the same
  columns, maybe behind pandas' unnamed index column.
- **Chart CSV** (a panel's *Download CSV*): ``Step`` then ``<run> - <metric>`` columns,
  with ``__MIN``/``__MAX`` columns in full-fidelity mode. Each row is one x-axis
  bucket: the value is the bucket's *last* point, ``<metric>_min``/``_max`` its extremes
  (``meta["bucketed"]``); without them the points may be a random sample
  (``meta["sampled"]``). One run per file: a chart of several runs is refused.

A history of exactly 500 rows is what ``run.history()`` returns by default, a sample:
it is flagged (``meta["sampled"] = True`` and a caveat). A W&B *runs table* export
(one row per run: ``Name``, ``State``, ``Created``...) holds no history and is refused
with a message saying so. Mapping and merging: ``parsers.wandb.history``.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from logbook.errors import InputError
from logbook.parsed import Parsed
from logbook.run import parquet_metadata
from logbook.textio import read_lines
from parsers.csv_metrics import numbers, read_csv
from parsers.tags import MAPS as _TAG_MAPS
from parsers.wandb import history as wh

NAME = "wandb"
DESCRIPTION = "W&B exports: run-history Parquet/CSV (_step, _runtime, ...), chart CSV"
EXAMPLE = '"Step","fluent-sun-12 - train/loss","fluent-sun-12 - train/loss__MIN",...'
MAPS = (
    "trainer/global_step|train/global_step|_step->step, _timestamp->time, _runtime->"
    "runtime_s; keys as TensorBoard tags: " + _TAG_MAPS
)

_CHART_COL = re.compile(r"^(?P<run>.+?) - (?P<key>.+?)(?P<agg>__MIN|__MAX)?$")
_RUNS_TABLE = {"Name", "State", "Created", "Runtime"}
_STEP_HEADS = {"Step", "step", "_step"} | set(wh.STEP_KEYS)


def _header(head: list[str]) -> list[str]:
    first = next((h for h in head if h.strip() and not h.startswith("#")), "")
    return [c.strip().strip('"') for c in first.split(",")]


SNIFF_MAX = 90  # the highest score sniff gives


def sniff(head: list[str]) -> int:
    """90 for a chart CSV (``Step`` and ``<run> - <key>`` columns), 85 for a history
    CSV (a ``_step`` column), 70 for a runs table (refused when read, with a reason)."""
    cols = _header(head)
    if len(cols) < 2:
        return 0
    if cols[0] in _STEP_HEADS and all(_CHART_COL.match(c) for c in cols[1:] if c):
        return 90
    if "_step" in cols:
        return 85
    return 70 if set(cols) >= _RUNS_TABLE else 0


def sniff_path(path: Path) -> int:
    """90 for a Parquet file with a ``_step`` column and no logbook header."""
    if path.suffix.lower() != ".parquet" or not path.is_file():
        return 0
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, ValueError):
        return 0
    if b"logbook" in {**(schema.metadata or {}), **parquet_metadata(path)}:
        return 0
    return 90 if "_step" in schema.names else 0


def read_path(path: Path) -> list[Parsed]:
    if sniff_path(path):
        return [_parquet(path)]
    lines, _ = read_lines(path)
    return [parse(lines, str(path))]


def _parquet(path: Path) -> Parsed:
    try:
        frame = pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    numeric = [c for c, t in frame.schema.items() if t.is_numeric() or t == pl.Boolean]
    skipped = [c for c in frame.columns if c not in numeric]
    frame = frame.select(pl.col(numeric).cast(pl.Float64)).with_row_index("line", offset=1)
    frame = frame.with_columns(pl.col("line").cast(pl.Int64))
    caveats = [f"W&B: {len(skipped)} non-numeric column(s) skipped: {', '.join(skipped[:8])}"]
    table = wh.Table(frame, str(path), caveats=caveats if skipped else [])
    part = wh.to_parsed(table)
    part.meta.update({"file": str(path), "lines": frame.height})
    return part


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    header, raw, blank = read_csv(lines, name)
    if set(header) >= _RUNS_TABLE:
        raise InputError(
            f"{name}: a W&B runs table (one row per run: Name, State, ...) holds no history: "
            "export the run's history or a chart instead"
        )
    if header and header[0] in _STEP_HEADS and all(_CHART_COL.match(c) for c in header[1:] if c):
        return _chart(header, raw, blank, name)
    raw = wh.drop_index(raw)
    cols = [c for c in raw.columns if c != "_line"]
    frame = numbers(raw, cols)
    keep = [c for c in cols if frame.get_column(c).is_not_null().any()]
    skipped = [c for c in cols if c not in keep]
    frame = frame.select(keep).with_columns(raw.get_column("_line").alias("line"))
    caveats = [f"W&B: {len(skipped)} column(s) without numbers skipped: {', '.join(skipped[:8])}"]
    table = wh.Table(frame, name, ignored=1 + blank, caveats=caveats if skipped else [])
    return wh.to_parsed(table)


def _chart(header: list[str], raw: pl.DataFrame, blank: int, name: str) -> Parsed:
    """A panel export: one run's ``<run> - <key>`` columns renamed to their keys."""
    runs: dict[str, None] = {}
    rename: dict[str, str] = {header[0]: "_step" if header[0] == "Step" else header[0]}
    bucketed = False
    for c in header[1:]:
        m = _CHART_COL.match(c)
        if not m:
            continue
        runs[m.group("run")] = None
        agg = m.group("agg")
        bucketed |= agg is not None
        rename[c] = m.group("key") + ({"__MIN": "_min", "__MAX": "_max"}.get(agg or "", ""))
    if len(runs) > 1:
        raise InputError(
            f"{name}: a W&B chart export with {len(runs)} runs ({', '.join(runs)}): logbook "
            "reads one run: export the chart with one run shown"
        )
    frame = numbers(raw, list(rename)).rename(rename)
    frame = frame.with_columns(raw.get_column("_line").alias("line"))
    what = (
        "each row is the last point of an x-axis bucket; the bucket's extremes are in "
        "<key>_min/<key>_max"
        if bucketed
        else "the points may be a random sample of the logged steps"
    )
    meta = {"bucketed": True} if bucketed else {"sampled": True}
    table = wh.Table(frame, name, ignored=1 + blank, caveats=[f"W&B chart export: {what}"],
                     meta={**meta, "run": next(iter(runs), None)})  # fmt: skip
    return wh.to_parsed(table)
