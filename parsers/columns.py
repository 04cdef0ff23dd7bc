"""Column helpers shared by several formats: the snake_case name of a metric key, and the
core columns (``step``, ``time``, ``line``) the stitcher reads from every part.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from logbook.schema import METRIC_COLUMNS


def snake(key: str) -> str:
    """``train/z_loss`` -> ``train_z_loss``; ``lm loss`` -> ``lm_loss``; ``trainLoss`` ->
    ``train_loss``; leading and trailing underscores kept (``_step``)."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key.strip())
    lead = len(name) - len(name.lstrip("_"))
    body = re.sub(r"[^0-9a-zA-Z]+", "_", name[lead:]).lower()
    return "_" * lead + body if body or lead else "_"


def whole_counts(metrics: pl.DataFrame) -> pl.DataFrame:
    """The schema's integer columns (``samples``, ``tokens``, ``skipped``, ...) of a frame
    read as floats, as whole numbers; a value that is none (NaN, inf, beyond int64) is
    left empty."""
    fix = [
        c
        for c, t in metrics.schema.items()
        if c in METRIC_COLUMNS and METRIC_COLUMNS[c].is_integer() and t.is_float()
    ]
    return metrics.with_columns(
        pl.when(pl.col(c).is_finite() & (pl.col(c).abs() < 9.2e18))
        .then(pl.col(c).round(0))
        .cast(pl.Int64, strict=False)
        .alias(c)
        for c in fix
    )


def with_core(metrics: pl.DataFrame) -> pl.DataFrame:
    """``step``, ``time`` and ``line`` present (null when unknown), typed as the schema
    says: the stitcher reads them from every part."""
    missing = [
        pl.lit(None, dtype=METRIC_COLUMNS[c]).alias(c)
        for c in ("step", "time", "line")
        if c not in metrics.columns
    ]
    metrics = metrics.with_columns(missing) if missing else metrics
    return metrics.with_columns(pl.col("time").cast(METRIC_COLUMNS["time"]))


def table_columns(path: Path) -> list[str] | None:
    """The column names of a Parquet file that is not logbook's own (None: not such a
    file, or not readable)."""
    if path.suffix.lower() != ".parquet" or not path.is_file():
        return None
    import pyarrow.parquet as pq

    from logbook.run import parquet_metadata

    try:
        schema = pq.read_schema(path)
        meta = {**(schema.metadata or {}), **parquet_metadata(path)}
    except (OSError, ValueError):
        return None
    return None if b"logbook" in meta else list(schema.names)


def python_time(col: str = "time") -> pl.Expr:
    """Column ``col`` with times outside the years 1-9999 (a damaged stamp) as none:
    nothing downstream (events, reports) can hold them."""
    return pl.when(pl.col(col).dt.year().is_between(1, 9999)).then(pl.col(col)).alias(col)


def repeated(frame: pl.DataFrame, cols: list[str]) -> list[str]:
    """The columns of ``cols`` with a value on more than one row (and ``loss`` always): a
    value logged once, alone on its row (a parameter count, a closing row of settings),
    is the run's metadata, not a record."""
    return [c for c in cols if c == "loss" or frame.get_column(c).count() > 1]
