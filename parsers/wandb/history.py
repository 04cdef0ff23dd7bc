"""A W&B history table (rows of ``wandb.log`` calls) -> records and validation events.

Used for the run-history Parquet export, history CSVs (``run.history().to_csv()``,
``scan_history``) and chart exports (after their columns are renamed). The step is
the trainer's own when the table has one (``trainer/global_step`` from Lightning,
``train/global_step`` from Hugging Face), else W&B's ``_step`` (one per ``log`` call);
``_timestamp`` -> ``time``, ``_runtime`` -> ``runtime_s``. Keys map as TensorBoard
tags do (``parsers.tags``); rows with only evaluation keys become
``validation`` events; adjacent rows of one step (a trainer logging in several calls)
merge into one record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers import tags as tt
from parsers.columns import repeated, with_core
from parsers.csv_metrics import merge_steps

CHART_X = "_chart_x"  # a chart export's x-axis (renamed so): the step of its rows
STEP_KEYS = (
    CHART_X,
    "trainer/global_step", "train/global_step", "global_step", "step", "iter", "iteration",
    "_step",
)  # fmt: skip
SAMPLED_ROWS = 500  # what run.history() returns unless asked for more
SAMPLED_CAVEAT = (
    "W&B: {n} rows, as run.history() returns by default: a sample of the logged steps, "
    "so spikes between them are missing (export with scan_history or the history artifact)"
)
INDEX_NAMES = ("", "Unnamed: 0", "index")


@dataclass
class Table:
    frame: pl.DataFrame  # numeric columns (Float64) named by their keys, plus ``line``
    name: str
    ignored: int = 0  # lines that are no row (header, blank lines)
    caveats: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def drop_index(frame: pl.DataFrame) -> pl.DataFrame:
    """pandas' unnamed index column (0, 1, 2, ...) is no metric."""
    first = frame.columns[0]
    if first not in INDEX_NAMES or frame.height == 0:
        return frame
    col = frame.get_column(first).cast(pl.Float64, strict=False)
    if col.null_count() == 0 and col.equals(pl.Series(range(frame.height)).cast(pl.Float64)):
        return frame.drop(first)
    return frame


def to_parsed(t: Table) -> Parsed:
    f = t.frame
    step_key = next((k for k in STEP_KEYS if k in f.columns), None)
    keys = [c for c in f.columns if c not in ("line", step_key, "_timestamp", "_runtime")]
    exprs: list[pl.Expr] = [pl.col("line")]
    if step_key is not None:
        exprs.append(pl.col(step_key).round(0).cast(pl.Int64, strict=False).alias("step"))
    if "_timestamp" in f.columns:
        ts = pl.col("_timestamp")
        us = (ts * 1e6).round(0).cast(pl.Int64, strict=False)
        us = pl.when(ts.is_finite() & (ts > 0) & (ts < 1e11)).then(us)
        exprs.append(pl.from_epoch(us, time_unit="us").dt.replace_time_zone("UTC").alias("time"))
    if "_runtime" in f.columns:
        exprs.append(pl.col("_runtime").alias("runtime_s"))
    evals = [k for k in keys if tt.eval_split(k)]
    train = [k for k in keys if k not in evals]
    names = tt.columns(train)
    names = {k: ("wandb_step" if k == "_step" else v) for k, v in names.items()}
    base = f.select(*exprs, *[pl.col(k).alias(names[k]) for k in train], *evals)
    cols = [names[k] for k in train]
    steady = repeated(base, cols)  # (``trainable_parameters`` alone at _step 0: no record)
    has_train = pl.any_horizontal(pl.col(steady).is_not_null()) if steady else pl.lit(False)
    has_eval = pl.any_horizontal(pl.col(evals).is_not_null()) if evals else pl.lit(False)
    # a row with a training loss beside evaluation values is both a record and an event
    lossy = pl.col("loss").is_not_null() if "loss" in cols else pl.lit(False)
    kinds = base.with_columns(has_train.alias("_t"), has_eval.alias("_e"), lossy.alias("_l"))
    rows = kinds.filter(pl.col("_t") & (~pl.col("_e") | pl.col("_l"))).select(
        [c for c in base.columns if c not in evals]
    )
    records, merged = merge_steps(rows)
    context = [c for c in ("epoch",) if c in base.columns]
    events = _validations(kinds.filter("_e"), evals, context, t.name)
    empty = kinds.filter(~pl.col("_t") & ~pl.col("_e")).height
    ints = [
        pl.col(c).round(0).cast(pl.Int64, strict=False)
        for c in (*tt.INTEGER, "wandb_step")
        if c in records.columns
    ]
    caveats = list(t.caveats)
    meta = dict(t.meta)
    if f.height == SAMPLED_ROWS:
        caveats.append(SAMPLED_CAVEAT.format(n=f.height))
        meta["sampled"] = True
    if step_key == "_step" and "_step" in f.columns:
        caveats.append("W&B: no trainer step in the table: W&B's _step (one per log call) used")
    return Parsed(
        metrics=with_core(records.with_columns(ints)),
        events=events,
        meta={**meta, "caveats": caveats, "continued_lines": merged},
        ignored=t.ignored + empty,
    )


def _validations(
    rows: pl.DataFrame, cols: list[str], context: list[str], name: str
) -> list[EventBase]:
    """One event per row with evaluation values (``context`` columns, the epoch, added
    to its values)."""
    out: list[EventBase] = []
    extra = [c for c in ("step", "time") if c in rows.columns]
    for row in rows.select("line", *extra, *cols, *context).iter_rows(named=True):
        present = {c: row[c] for c in cols if row[c] is not None}
        splits = {tt.eval_split(c) for c in present}
        split = splits.pop() if len(splits) == 1 else None
        values = {(tt.eval_key(c, split) if split else tt.snake(c)): v for c, v in present.items()}
        values.update({c: row[c] for c in context if row[c] is not None})
        out.append(
            Validation(
                step=row.get("step"),
                time=row.get("time"),
                split=split,
                values=values,
                source=Source(file=name, line=row["line"]),
            )
        )
    return out
