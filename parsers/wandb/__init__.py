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
from logbook.textio import read_lines
from parsers.columns import table_columns
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
_AXIS = re.compile(r"^[A-Za-z_][\w/.\- ]{0,39}$")  # a chart's x-axis name: Step, epoch, ...
_RUNS_TABLE = {"Name", "State", "Created", "Runtime"}
_STEP_HEADS = {"Step", "step", "_step"} | set(wh.STEP_KEYS)
CHART_X = wh.CHART_X  # a chart's x-axis column: the step of its rows


def _is_chart(cols: list[str]) -> bool:
    """A panel export: an x-axis column, then only ``<run> - <key>`` columns."""
    rest = [c for c in cols[1:] if c]
    axis = bool(_AXIS.match(cols[0])) and not _CHART_COL.match(cols[0])
    return bool(rest) and axis and all(_CHART_COL.match(c) for c in rest)


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
    if _is_chart(cols):
        return 90
    if "_step" in cols:
        return 85
    return 70 if set(cols) >= _RUNS_TABLE else 0


def sniff_path(path: Path) -> int:
    """90 for a Parquet file with a ``_step`` column and no logbook header."""
    cols = table_columns(path)
    return 90 if cols and "_step" in cols else 0


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
    if header and _is_chart(header):
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
    """A panel export: each run's ``<run> - <key>`` columns renamed to their keys; the
    first column is the chart's x-axis (``Step``, or what the panel was plotted on). An
    export of several runs gives their records stacked, each row naming its run in
    ``_run`` (``parsers.read_logs`` reads them as runs of their own)."""
    runs: dict[str, list[str]] = {}
    for c in header[1:]:
        if m := _CHART_COL.match(c):
            runs.setdefault(m.group("run"), []).append(c)
    x = header[0]
    axis = [] if x in _STEP_HEADS else [f"W&B chart export: its x-axis {x!r} read as the step"]
    parts = []
    for k, (run, cols) in enumerate(runs.items()):
        rename = {x: CHART_X}
        bucketed = False
        for c in cols:
            m = _CHART_COL.match(c)
            agg = m.group("agg")
            bucketed |= agg is not None
            rename[c] = m.group("key") + ({"__MIN": "_min", "__MAX": "_max"}.get(agg or "", ""))
        frame = numbers(raw, list(rename)).rename(rename)
        frame = frame.with_columns(raw.get_column("_line").alias("line"))
        what = (
            "each row is the last point of an x-axis bucket; the bucket's extremes are in "
            "<key>_min/<key>_max"
            if bucketed
            else "the points may be a random sample of the logged steps"
        )
        meta = {"bucketed": True} if bucketed else {"sampled": True}
        table = wh.Table(frame, name, ignored=1 + blank if k == 0 else 0,
                         caveats=[f"W&B chart export: {what}", *axis],
                         meta={**meta, "run": run})  # fmt: skip
        parts.append(wh.to_parsed(table))
    return parts[0] if len(parts) == 1 else _stacked(parts, list(runs), raw.height + 1 + blank)


def _stacked(parts: list[Parsed], runs: list[str], lines: int) -> Parsed:
    """Several runs' parts as one, each record naming its run (``_run``), each line
    counted once: a record of some run, an event, or ignored (empty for every run)."""
    named = [
        p.metrics.with_columns(pl.lit(r).alias("_run")) for p, r in zip(parts, runs, strict=True)
    ]
    metrics = pl.concat(named, how="diagonal_relaxed").sort("line", maintain_order=True)
    events = []
    for p, r in zip(parts, runs, strict=True):
        for e in p.events:
            e.run = r
            events.append(e)
    used = set(metrics.get_column("line").to_list()) | {e.source.line for e in events if e.source}
    meta = dict(parts[0].meta)
    meta["runs"] = runs
    return Parsed(metrics=metrics, events=events, meta=meta, ignored=lines - len(used))
