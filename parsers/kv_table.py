"""Key-value tables, one a log interval, as OpenAI's ``logger.dumpkvs`` prints them
(baselines, Spinning Up, guided-diffusion, improved-diffusion, consistency models)::

    -----------------------------
    | loss          | 0.0312    |
    | samples       | 3.92e+07  |
    | step          | 1.53e+05  |
    -----------------------------

Every table between two dashed rules is a record: its keys by their names (``step``,
``misc/total_timesteps``, ``total_timesteps``, ``TotalEnvInteracts``, ``Epoch`` give the
step; ``loss`` the loss), a value printed as ``%-8.3g`` read as printed (a caveat says
where a step was rounded to 3 digits). A table without a step is numbered in order. The
lines between tables are read for events (an fp16 overflow, a crash).
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, OverflowSkip
from parsers.columns import whole_counts, with_core
from parsers.reader import aliases, events
from parsers.reader.numbers import WHOLE_NUMBER

NAME = "kv-table"
DESCRIPTION = "key-value tables between dashed rules (OpenAI logger.dumpkvs)"
EXAMPLE = "| loss          | 0.0312    |"
MAPS = (
    "each table between dashed rules->one record; step/total_timesteps/Epoch->step, "
    "loss->loss, other keys by their names"
)
SNIFF_MAX = 75
_RULE = re.compile(r"^\s*-{10,}\s*$")
_ROW = re.compile(r"^\s*\|\s*([^|]*?\S)\s*\|\s*([^|]*?)\s*\|\s*$")
# the step's keys, the most global first
_STEPS = ("step", "misc_total_timesteps", "total_timesteps", "totalenvinteracts", "epoch")
_ROUNDED = re.compile(r"^\d\.\d{1,2}e\+0*(\d+)$")  # ``1.53e+05``: 3 digits of a larger step


def sniff(head: list[str]) -> int:
    """75 for a table of two rows or more between dashed rules, else 0."""
    return SNIFF_MAX if _tables(head) else 0


def _tables(texts: list[str]) -> list[tuple[int, int, list[tuple[str, str]]]]:
    """(first row index, rule after it, its rows) of every table with two rows or more."""
    out, rows, start, open_ = [], [], 0, False
    for k, t in enumerate(texts):
        if _RULE.match(t):
            if open_ and len(rows) >= 2:
                out.append((start, k, rows))
            rows, start, open_ = [], k + 1, True
            continue
        m = _ROW.match(t) if open_ else None
        if m is None:
            rows, open_ = [], False
            continue
        rows.append((m.group(1), m.group(2)))
    return out


def _value(cell: str) -> float | None:
    if not WHOLE_NUMBER.match(cell):
        return None
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    texts = lines.get_column("text").to_list()
    numbers = lines.get_column("line").to_list()
    records: list[dict] = []
    used: set[int] = set()
    rounded = 0
    for start, end, rows in _tables(texts):
        rec: dict = {"line": numbers[start]}
        steps: dict[str, float] = {}
        for key, cell in rows:
            v = _value(cell)
            norm = aliases.norm(key)
            if norm in _STEPS and v is not None:
                steps[norm] = v
                rounded += bool(_ROUNDED.match(cell.strip()))
                continue
            col = aliases.canonical(key) or aliases.column_of(key)
            if col in ("step", "line", "time", "segment", "source"):
                col = f"{col}_{norm}"
            rec.setdefault(col, v)
        step = next((steps[k] for k in _STEPS if k in steps), None)
        rec["step"] = int(step) if step is not None and abs(step) < 9e18 else None
        if "epoch" in steps and _STEPS.index("epoch") > min(_STEPS.index(k) for k in steps):
            rec["epoch"] = steps["epoch"]
        records.append(rec)
        used.update(range(start - 1, end + 1))
    metrics = pl.DataFrame(records, infer_schema_length=None) if records else pl.DataFrame()
    caveats = ["key-value tables: one record a table"]
    stepless: list[int] = []
    if metrics.height and 0 < metrics.get_column("step").null_count() < metrics.height:
        # (a table without the step the others show: unrecognized, not a record)
        stepless = metrics.filter(pl.col("step").is_null()).get_column("line").to_list()
        metrics = metrics.filter(pl.col("step").is_not_null())
        caveats.append(f"{len(stepless)} table(s) without a step, unlike the others: left out")
    if metrics.height:
        if metrics.get_column("step").null_count() == metrics.height:
            metrics = metrics.with_columns(pl.int_range(1, metrics.height + 1).alias("step"))
            caveats.append("no step in the tables: records numbered in order (1, 2, 3, ...)")
        metrics = metrics.with_columns(pl.col("step").cast(pl.Int64))
        floats = [c for c in metrics.columns if c not in ("line", "step")]
        metrics = metrics.with_columns(pl.col(c).cast(pl.Float64) for c in floats)
    if rounded:
        caveats.append(f"{rounded} step(s) printed with 3 significant digits (1.53e+05): rounded")
    found = events_between(texts, numbers, used, metrics, name)
    told = {e.source.line for e in found if e.source is not None}
    left = sorted(
        [
            numbers[k]
            for k, t in enumerate(texts)
            if k not in used and t.strip() and numbers[k] not in told
        ]
        + stepless
    )
    # blank lines and the tables' rules are put aside (a table's other rows continue
    # its record)
    ignored = sum(1 for k, t in enumerate(texts) if k not in used and not t.strip())
    ignored += sum(1 for k in used if 0 <= k < len(texts) and _RULE.match(texts[k]))
    return Parsed(
        metrics=with_core(whole_counts(metrics)),
        events=found,
        meta={"caveats": caveats} if records else {},
        unrecognized=pl.Series("line", left, dtype=pl.Int64),
        ignored=ignored,
    )


def events_between(
    texts: list[str], numbers: list[int], used: set[int], metrics: pl.DataFrame, name: str
) -> list[EventBase]:
    """The events the lines between records state (``used``: the records' lines); an
    overflow at the step after the record before it (one step each), another event
    without a step at that record's step."""
    rec_lines = metrics.get_column("line").to_numpy() if metrics.height else np.zeros(0)
    rec_steps = (
        metrics.get_column("step").cast(pl.Float64).to_numpy() if metrics.height else np.zeros(0)
    )
    out: list[EventBase] = []
    since: dict[int, int] = {}
    for k, t in enumerate(texts):
        if k in used or not t.strip():
            continue
        ev = events.read_event(t.strip(), numbers[k], name)
        if ev is None:
            continue
        i = int(np.searchsorted(rec_lines, numbers[k])) - 1
        if i >= 0 and not np.isfinite(rec_steps[i]):  # (a table without a step)
            i = -1
        if isinstance(ev, OverflowSkip) and ev.step is None and i >= 0:
            since[i] = since.get(i, 0) + 1
            ev.step = int(rec_steps[i]) + since[i]
        elif getattr(ev, "step", None) is None and i >= 0 and ev.kind != "restart":
            ev.step = int(rec_steps[i])
        out.append(ev)
    return out
