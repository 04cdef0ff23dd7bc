"""Metric tables written as CSV (Lightning ``CSVLogger``, W&B exports): text -> frame,
and the merging of the several rows a trainer writes for one step.

The header is the first line that is not blank or a ``#`` comment; every other
non-blank line is one row (the writers quote no newlines), kept with its line number.
Values stay text here; the format modules decide what is a number.
"""

from __future__ import annotations

import io

import polars as pl

from logbook.errors import InputError


def read_csv(lines: pl.DataFrame, name: str) -> tuple[list[str], pl.DataFrame, int]:
    """(header names, rows as text columns plus ``line``, blank lines)."""
    text = lines.get_column("text")
    # blank lines, and a collector's ``#`` comments above the header, are not rows
    comment = text.str.starts_with("#") & (pl.Series(range(lines.height)) < _first_row(text))
    blank = (text.str.strip_chars().str.len_bytes() == 0) | comment
    body = lines.filter(~blank)
    if body.height == 0:
        raise InputError(f"{name}: file is empty")
    payload = "\n".join(body.get_column("text").to_list()) + "\n"
    try:
        frame = pl.read_csv(
            io.StringIO(payload),
            infer_schema=False,
            has_header=True,
            truncate_ragged_lines=False,
        )
    except pl.exceptions.PolarsError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{name}: not a readable CSV table ({first})") from None
    if frame.height != body.height - 1:
        raise InputError(f"{name}: a CSV row spans several lines (quoted newline): not read")
    header = [c for c in frame.columns]
    frame = frame.with_columns(body.get_column("line").slice(1).alias("_line"))
    return header, frame, int(blank.sum())


def _first_row(text: pl.Series) -> int:
    """Index of the first line that is neither blank nor a ``#`` comment."""
    ok = ~(text.str.starts_with("#") | (text.str.strip_chars() == ""))
    idx = ok.arg_true()
    return int(idx[0]) if idx.len() else text.len()


def numbers(frame: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """Text columns as Float64 (``nan``, ``inf`` read; empty or text -> null)."""
    return frame.select(
        pl.col(c).str.strip_chars().str.strip_chars('"').cast(pl.Float64, strict=False)
        for c in cols
    )


def merge_steps(rows: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Adjacent rows of one step -> one row (the first value of each column), and how
    many rows were merged into another."""
    if rows.height == 0 or "step" not in rows.columns:
        return rows, 0
    new = (pl.col("step") != pl.col("step").shift(1)).fill_null(True) | pl.col("step").is_null()
    grouped = rows.with_columns(new.cum_sum().alias("_g"))
    others = [c for c in rows.columns if c != "line"]
    out = grouped.group_by("_g", maintain_order=True).agg(
        pl.col("line").first(), *[pl.col(c).drop_nulls().first() for c in others]
    )
    return out.drop("_g"), rows.height - out.height
