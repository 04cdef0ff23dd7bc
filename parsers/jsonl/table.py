"""Generic metrics JSONL: decoded objects -> metrics rows and validation rows.

A row with at least one training value becomes a record. A row holding only
evaluation values (keys starting ``eval_``, ``val_``, ``valid_``, ``validation_`` or
``test_`` once snake_cased) becomes a ``validation`` event: written as a record it would
repeat its step and look like a rewind. A row with no numeric value at all, or without
a step in a file whose other rows have one (a config or metadata line), is counted as
ignored. A row that says it is an evaluation (mmcv's ``*.log.json``: ``"mode": "val"``
beside ``"mode": "train"`` rows) is a ``validation`` event, whatever keys it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from logbook.schema import METRIC_COLUMNS
from parsers.columns import repeated, snake
from parsers.jsonl import columns as jc
from parsers.reader import aliases as shared

_INTEGER = ("step", "skipped", "nan_count", "samples", "tokens", "batch_size")
_RESERVED = ("time", "segment", "source", "line")


@dataclass
class Table:
    metrics: pl.DataFrame  # records: line, time, canonical and other columns
    evals: pl.DataFrame  # eval-only rows: line, time, step and the eval columns
    ignored: int  # rows without a numeric value


def _time_column(raw: pl.DataFrame, names: dict[str, str]) -> tuple[set[str], pl.Series]:
    """Wall-clock time from the time-like columns whose every value reads as one (in
    ``TIME_KEYS`` order, the first present in a row wins); also those columns."""
    used: list[str] = []
    series: list[pl.Series] = []
    for key in jc.TIME_KEYS:
        for col in (c for c, sn in names.items() if sn == key):
            expr = jc.timestamps(pl.col(col), raw.schema[col])
            if expr is None:
                continue
            ts = raw.select(expr.alias("time")).to_series()
            if ts.null_count() == raw.get_column(col).null_count():
                used.append(col)
                series.append(ts)
    if not series:
        return set(), pl.Series("time", [None] * raw.height, dtype=pl.Datetime("us", "UTC"))
    return set(used), pl.select(pl.coalesce(series).alias("time")).to_series()


def _numbers(raw: pl.DataFrame, skip: set[str]) -> dict[str, pl.Expr]:
    out = {}
    for col, dtype in raw.schema.items():
        if col in skip:
            continue
        expr = jc.as_number(pl.col(col), dtype)
        if expr is not None:
            out[col] = expr
    return out


_COUNT = r"^\s*(\d{1,18})\s*/\s*\d+\s*$"


def _counts(raw: pl.DataFrame, paths: dict[str, str], names: dict[str, str]) -> dict[str, pl.Expr]:
    """A count printed with its total (``"global_step/max_steps": "601/2161"``): the
    count, under the key's first part (``global_step``)."""
    out = {}
    for col, dtype in raw.schema.items():
        key = paths.get(col, col)
        if dtype != pl.String or "/" not in key:
            continue
        values = raw.get_column(col).drop_nulls()
        if values.len() == 0 or not values.str.contains(_COUNT).all():
            continue
        names[col] = snake(key.split("/", 1)[0])
        out[col] = pl.col(col).str.extract(_COUNT, 1).cast(pl.Float64, strict=False)
    return out


def _exact_integer(raw: pl.DataFrame, col: str) -> pl.Expr:
    """An integer column read without a float in between (exact beyond 2^53; a value
    beyond int64 is null)."""
    dtype = raw.schema[col]
    if dtype.is_integer():
        return pl.col(col).cast(pl.Int64, strict=False)
    if dtype == pl.String:
        return pl.col(col).str.strip_chars().cast(pl.Int64, strict=False)
    return pl.lit(None, pl.Int64)


def _name(sn: str) -> str:
    return f"{sn}_value" if sn in _RESERVED or sn in METRIC_COLUMNS else sn


def shared_alias(sn: str) -> str | None:
    """The detector column a snake_case key maps to in the shared alias table, unless it
    is an evaluation key."""
    if jc.EVAL.match(sn) or sn in _RESERVED:
        return None
    return shared.detector_column(sn)


def build(raw: pl.DataFrame, paths: dict[str, str], line: pl.Series) -> Table:
    """``raw``: flattened decoded objects (``paths``: each column's key path), one row per
    line in ``line``. Keys with one snake_case name (``eval/loss``, ``eval_loss``) make
    one column, the first key present in a row giving its value."""
    names = {c: snake(paths.get(c, c)) for c in raw.columns}
    time_cols, time = _time_column(raw, names)
    numbers = _numbers(raw, time_cols)
    numbers.update(_counts(raw, paths, names))
    by_snake: dict[str, list[str]] = {}
    for col in numbers:
        by_snake.setdefault(names[col], []).append(col)
    exprs: dict[str, pl.Expr] = {}
    used: set[str] = set()
    for canon, aliases in jc.ALIASES.items():
        cols = [c for a in aliases for c in by_snake.get(snake(a), [])]
        if cols:
            value = pl.coalesce([numbers[c] for c in cols])
            if canon in _INTEGER:
                value = pl.coalesce(
                    *(_exact_integer(raw, c) for c in cols),
                    value.round(0).cast(pl.Int64, strict=False),
                )
            exprs[canon] = value
            used.update(cols)
    for sn, cols in by_snake.items():
        rest = [c for c in cols if c not in used]
        canon = shared_alias(sn)
        if rest and canon is not None and canon not in exprs:
            # a key the shared alias table knows (``total_loss``, ``train/act_norm``)
            exprs[canon] = pl.coalesce([numbers[c] for c in rest])
            used.update(rest)
    for sn, cols in by_snake.items():
        rest = [numbers[c] for c in cols if c not in used]
        if rest:
            exprs[_name(sn)] = pl.coalesce(rest)
    if exprs:
        table = raw.select(**exprs).with_columns(line, time)
    else:  # (objects without a number: rows of lines only)
        if time.len() != line.len():
            time = pl.Series("time", [None] * line.len(), dtype=pl.Datetime("us", "UTC"))
        table = pl.DataFrame([line, time])
    return _split(table, _eval_mode(raw))


# mmcv's JSON log (``*.log.json``) says what each row is: ``"mode": "train"`` or ``"val"``
_EVAL_MODES = ("val", "eval", "test", "valid", "validation")


def _eval_mode(raw: pl.DataFrame) -> pl.Series | None:
    """The rows whose ``mode`` key names an evaluation (None: no such key)."""
    if "mode" not in raw.columns or raw.schema["mode"] != pl.String:
        return None
    mode = raw.get_column("mode").str.to_lowercase()
    hit = mode.is_in(_EVAL_MODES).fill_null(False)
    return hit if hit.any() and mode.eq("train").any() else None


_PROGRESS = {"epoch", "percentage", "total_steps", "max_steps", "progress", "epoch_pct"}
# what LLaMA-Factory's closing row repeats besides (its throughput and tokens are 0 there)
_CLOSING = {"elapsed_time", "remaining_time", "throughput", "total_tokens"}


def _split(table: pl.DataFrame, eval_mode: pl.Series | None = None) -> Table:
    if eval_mode is not None:  # (mmcv: the rows of an evaluation mode are evaluations)
        rest = _split(table.filter(~eval_mode))
        told = table.filter(eval_mode)
        core = ["line", "time"] + (["step"] if "step" in told.columns else [])
        values = [
            c for c in told.columns if c not in core and told.get_column(c).is_not_null().any()
        ]
        told = told.select(
            *core, *(pl.col(c).alias(c if jc.EVAL.match(c) else f"val_{c}") for c in values)
        )
        evals = pl.concat([rest.evals, told], how="diagonal_relaxed").sort("line")
        return Table(rest.metrics, evals, rest.ignored)
    evals = [c for c in table.columns if jc.EVAL.match(c)]
    core = {"line", "time", "step"}
    train = [c for c in table.columns if c not in core and c not in evals]
    # keys of one row alone (a closing row of settings and paths) make no record; nor does
    # the Trainer's closing summary (``train_runtime``, its mean ``train_loss``)
    steady = repeated(table, train)
    has_train = pl.any_horizontal(pl.col(steady).is_not_null()) if steady else pl.lit(False)
    if "train_runtime" in table.columns:
        has_train = has_train & pl.col("train_runtime").is_null()
    has_eval = pl.any_horizontal(pl.col(evals).is_not_null()) if evals else pl.lit(False)
    # a row without a step in a file whose rows have steps is metadata (a config line)
    stepped = "step" in table.columns and table.get_column("step").is_not_null().any()
    has_train = has_train & pl.col("step").is_not_null() if stepped else has_train
    has_eval = has_eval & pl.col("step").is_not_null() if stepped else has_eval
    if evals and "loss" in table.columns and table.get_column("loss").is_not_null().any():
        # where training rows carry a loss, a row with evaluation values and no loss is
        # an evaluation, whatever bookkeeping it shares (mmengine's ``data_time``, ``time``)
        has_train = has_train & (pl.col("loss").is_not_null() | ~has_eval)
    measured = [c for c in steady if c not in _PROGRESS]
    if not measured and steady:
        # only progress values on every row (LLaMA-Factory's trainer_log.jsonl of a
        # prediction job: steps, percentage, times): no training to read
        has_train = pl.lit(False)
    elif "loss" in measured and table.get_column("loss").is_not_null().any():
        # a row that has only progress values (epoch, percentage, ...) is bookkeeping,
        # not a step whose loss was lost: LLaMA-Factory's closing row of
        # trainer_log.jsonl writes null for its loss and lr
        kept = [c for c in measured if c not in _CLOSING] or measured
        has_train = has_train & pl.any_horizontal(pl.col(kept).is_not_null())
    kind = table.select(has_train.alias("t"), (~has_train & has_eval).alias("e"))
    records = table.filter(kind.get_column("t"))
    keep = [c for c in records.columns if c in core or records.get_column(c).is_not_null().any()]
    eval_rows = table.filter(kind.get_column("e"))
    eval_cols = ["line", "time"] + (["step"] if "step" in table.columns else []) + evals
    ignored = table.height - records.height - eval_rows.height
    return Table(records.select(keep), eval_rows.select(eval_cols), ignored)
