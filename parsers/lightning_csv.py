"""PyTorch Lightning ``CSVLogger`` ``metrics.csv``.

The header holds every key ever logged (``epoch``, ``step`` and the metrics, sorted);
each ``log_metrics`` call writes one row with the keys it logged, the rest empty.
So one training step often spans several rows (``LearningRateMonitor`` writes its
``lr-<Optimizer>`` row beside the ``train_loss`` row): adjacent rows of one step are
merged into one record (the rows after the first counted in
``meta["continued_lines"]``). Rows with only evaluation keys (``val_loss``) become
``validation`` events; rows with only epoch aggregates (``train_loss_epoch``,
``epoch_time``, the mean of the epoch's steps) are ignored, with a caveat. Keys map as
TensorBoard tags do (``train_loss``/``train_loss_step``->``loss``, ``lr-SGD``->``lr``...).
"""

from __future__ import annotations

import math
import re
from typing import Any

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers import tags as tt
from parsers.columns import with_core
from parsers.csv_metrics import merge_steps, numbers, read_csv

NAME = "lightning-csv"
DESCRIPTION = "PyTorch Lightning CSVLogger metrics.csv (epoch,step,<metrics>)"
EXAMPLE = "epoch,lr-SGD,step,train_loss_epoch,train_loss_step,val_loss"
MAPS = (
    "step->step, train_loss|train_loss_step|loss->loss, lr-<Optimizer>->lr, grad_norm, "
    "epoch and other keys kept; val_*/test_* rows->validation events; *_epoch rows ignored"
)
META_COLS = ("step", "epoch")


SNIFF_MAX = 85  # the highest score sniff gives


def sniff(head: list[str]) -> int:
    """85 for a CSV header with ``step`` and ``epoch`` columns and comma rows."""
    body = [h.strip() for h in head if h.strip() and not h.startswith("#")]
    if len(body) < 2:
        return 0
    cols = [c.strip().strip('"') for c in body[0].split(",")]
    if "step" not in cols or "epoch" not in cols or "_step" in cols or len(cols) < 3:
        return 0
    return 85 if all(b.count(",") == len(cols) - 1 for b in body[1:20]) else 0


def _per_epoch(column: str) -> bool:
    """A value logged once an epoch: ``train_loss_epoch``, ``train_epoch_perplexity``,
    ``epoch_time`` (``epoch`` a word of the name, the name not ``epoch`` itself)."""
    words = re.split(r"[^0-9a-z]+", column.lower())
    return column.lower() != "epoch" and "epoch" in words


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    header, raw, blank = read_csv(lines, name)
    metric_cols = [c for c in header if c not in META_COLS]
    vals = numbers(raw, header).with_columns(raw.get_column("_line").alias("line"))
    evals = [c for c in metric_cols if tt.eval_split(c)]
    epoch_aggs = [c for c in metric_cols if c not in evals and _per_epoch(c)]
    train = [c for c in metric_cols if c not in evals and c not in epoch_aggs]
    kinds = vals.with_columns(
        some(train).alias("_t"), some(evals).alias("_e"), some(epoch_aggs).alias("_a")
    )
    rows = kinds.filter(pl.col("_t") & ~pl.col("_e"))
    records, merged = merge_steps(rows.select("line", *[c for c in header if c in rows.columns]))
    names = tt.columns(train)
    records = records.rename({c: names[c] for c in train if c in records.columns})
    keep = [c for c in records.columns if c in ("line", "step") or records[c].is_not_null().any()]
    records = records.select(keep)
    ints = [
        pl.col(c).round(0).cast(pl.Int64, strict=False)
        for c in (*META_COLS, *tt.INTEGER)
        if c in records
    ]
    events = _validations(kinds.filter("_e"), evals, name)
    aggs = kinds.filter(~pl.col("_t") & ~pl.col("_e") & pl.col("_a")).height
    empty = kinds.filter(~pl.col("_t") & ~pl.col("_e") & ~pl.col("_a")).height
    caveats = []
    if aggs:
        caveats.append(
            f"{aggs} end-of-epoch row(s) ({', '.join(epoch_aggs)}) not read as records: "
            "they average the epoch's steps"
        )
    return Parsed(
        metrics=with_core(records.with_columns(ints)),
        events=events,
        meta={"caveats": caveats, "continued_lines": merged},
        ignored=1 + blank + aggs + empty,
    )


def some(cols: list[str]) -> pl.Expr:
    """Whether a row has a value in any of these columns."""
    return pl.any_horizontal(pl.col(cols).is_not_null()) if cols else pl.lit(False)


def _step(value: float) -> int | None:
    """A validation row's step as an integer; none for a damaged one (NaN, inf, a
    float beyond what a step can be)."""
    return int(value) if math.isfinite(value) and abs(value) < 2**53 else None


def _validations(rows: pl.DataFrame, cols: list[str], name: str) -> list[EventBase]:
    out: list[EventBase] = []
    for row in rows.select("line", "step", *cols).iter_rows(named=True):
        present: dict[str, Any] = {c: row[c] for c in cols if row[c] is not None}
        splits = {tt.eval_split(c) for c in present}
        split = splits.pop() if len(splits) == 1 else None
        values = {(tt.eval_key(c, split) if split else c): v for c, v in present.items()}
        step = row["step"]
        out.append(
            Validation(
                step=step if step is None or isinstance(step, int) else _step(step),
                split=split,
                values=values,
                source=Source(file=name, line=row["line"]),
            )
        )
    return out
