"""Polars helpers shared by the detectors that work on columns directly."""

from __future__ import annotations

import polars as pl


def runs_of(flag: pl.Expr) -> pl.Expr:
    """An id per maximal run of equal consecutive values of ``flag`` within a lineage
    (ids are unique across lineages; rows sorted by lineage)."""
    lineage = pl.col("lineage")
    change = (flag != flag.shift(1)) | (lineage != lineage.shift(1))
    return change.fill_null(True).cast(pl.Int64).cum_sum()
