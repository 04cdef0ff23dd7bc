"""Decode JSON object texts (one per row) into a frame, vectorized, with a per-row fallback.

Used by the generic JSONL parser and by the metaseq/fairseq ``train_inner`` parser. The
fast path hands all rows that look like whole objects to ``pl.read_ndjson`` at once; only
when that fails are rows checked one by one (still vectorized, with ``json_path_match``),
and only the few rows polars cannot read go through Python's ``json`` module, which also
accepts the bare ``NaN`` / ``Infinity`` tokens Python writes.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

ROW = "_row"  # position of the decoded object in the input series
_SAMPLE = 1000
_KEY = r'"((?:[^"\\]|\\.)*)"\s*:'
_NONFINITE = r"([:\[,]\s*)(-?Infinity|NaN)(\s*[,}\]])"


ExactKey = Callable[[str], bool] | None  # keys whose integers must stay exact


def quote_nonfinite(text: pl.Series) -> pl.Series:
    """Bare ``NaN``/``Infinity``/``-Infinity`` values (not JSON, but what Python writes)
    become the strings ``"NaN"``... so that polars can read the row; the strings cast
    back to floats later. A token inside a string value breaks the row instead, which
    then goes through the per-row fallback on its original text."""
    marked = text.str.contains("NaN|Infinity")
    if not marked.any():
        return text
    fixed = text
    for _ in range(2):  # adjacent tokens share a delimiter: a second pass catches them
        fixed = fixed.str.replace_all(_NONFINITE, '${1}"${2}"${3}')
    return pl.select(pl.when(marked).then(fixed).otherwise(text)).to_series()


def _buffer(rows: pl.Series) -> io.BytesIO:
    joined = rows.str.join("\n").to_arrow()
    data = joined.buffers()[2]
    return io.BytesIO(memoryview(data) if data is not None else b"")


def key_names(rows: pl.Series) -> list[str]:
    """The keys the rows hold, in first-seen order (nested keys too: harmless extras)."""
    return key_places(rows).get_column("key").unique(maintain_order=True).to_list()


def key_places(rows: pl.Series) -> pl.DataFrame:
    """Every key of every row in text order: ``row`` (position in ``rows``), ``place``
    (its place in the row) and ``key`` (nested keys too)."""
    found = rows.str.extract_all(_KEY).alias("key").to_frame().with_row_index("row")
    found = found.explode("key").drop_nulls("key")
    found = found.with_columns(pl.int_range(pl.len()).over("row").alias("place"))
    key = pl.col("key").str.slice(1).str.replace(r'"\s*:$', "")
    return found.select(pl.col("row").cast(pl.Int64), "place", key)


def _read(rows: pl.Series, strings: bool, exact: ExactKey = None) -> pl.DataFrame:
    """Read whole-object rows; with ``strings`` every value comes back as text (nested
    values as their JSON), and every key of every row gets a column. ``exact(key)``:
    whether a key holds integers that must stay exact (a step): one inferred as float
    (a value beyond 2^63 among them) is read again as text."""
    if not strings:
        df = pl.read_ndjson(_buffer(rows), infer_schema_length=None)
        redo = [k for k, t in df.schema.items() if t.is_float() and exact and exact(k)]
        if redo:
            over = {k: pl.String for k in redo}
            df = pl.read_ndjson(_buffer(rows), infer_schema_length=None, schema_overrides=over)
        return df
    keys = key_names(rows.head(_SAMPLE))
    df = pl.read_ndjson(_buffer(rows), schema={k: pl.String for k in keys})
    # a row with a key the sample did not have holds more "key": pairs than fields read
    pairs = rows.str.count_matches('":', literal=True)
    read = df.select(pl.sum_horizontal(pl.all().is_not_null())).to_series()
    missed = rows.filter((pairs > read).fill_null(True))
    if missed.len():  # (or a row with null values: then no key is new)
        new = [k for k in key_names(missed) if k not in keys]
        if new:
            df = pl.read_ndjson(_buffer(rows), schema={k: pl.String for k in keys + new})
    return df


def _whole_objects(rows: pl.Series) -> pl.Series:
    """Rows that are one valid JSON object and nothing else (per-row, vectorized)."""
    norm = rows.str.json_path_match("$")
    return norm.str.starts_with("{").fill_null(False)


def _python_row(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def stringify(obj: dict[str, Any]) -> dict[str, str | None]:
    """An object's values as text, the way polars reads them with a String schema."""
    out: dict[str, str | None] = {}
    for k, v in obj.items():
        if v is None or isinstance(v, str):
            out[k] = v
        elif isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, float) and not math.isfinite(v):
            out[k] = "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
        elif isinstance(v, int | float):
            out[k] = repr(v)
        else:
            out[k] = json.dumps(v)
    return out


def decode(
    payload: pl.Series,
    original: pl.Series | None = None,
    strings: bool = False,
    exact: ExactKey = None,
) -> tuple[pl.DataFrame, list[dict[str, Any]], np.ndarray]:
    """Decode each row of ``payload`` (JSON object text).

    Returns the frame of rows polars read (with column ``_row``), the rows only Python's
    ``json`` could read as ``(row, object)`` dicts (``{"_row": i, "obj": {...}}``), and
    the positions of rows that are not a JSON object at all. ``original`` is the text
    to retry per row (the payload before ``quote_nonfinite``). With ``strings`` all
    values are text (see :func:`_read`); otherwise types are inferred over all rows.
    """
    original = payload if original is None else original
    idx = pl.int_range(payload.len(), eager=True, dtype=pl.Int64).alias(ROW)
    stripped = payload.str.strip_chars()
    looks = (stripped.str.starts_with("{") & stripped.str.ends_with("}")).fill_null(False)
    good_idx = idx.filter(looks)
    good = stripped.filter(looks)
    try:
        frame = _read(good, strings, exact) if good.len() else pl.DataFrame()
    except pl.exceptions.PolarsError:
        whole = _whole_objects(good)
        good_idx, good = good_idx.filter(whole), good.filter(whole)
        try:
            frame = _read(good, strings, exact) if good.len() else pl.DataFrame()
        except pl.exceptions.PolarsError:  # valid rows polars cannot type together
            good_idx, good = good_idx.clear(), good.clear()
            frame = pl.DataFrame()
    frame = frame.with_columns(good_idx) if frame.width else pl.DataFrame({ROW: good_idx})
    done = np.zeros(payload.len(), dtype=bool)
    done[good_idx.to_numpy()] = True
    slow: list[dict[str, Any]] = []
    bad: list[int] = []
    for i in np.flatnonzero(~done).tolist():
        obj = _python_row(original[i])
        if obj is None:
            bad.append(i)
        else:
            slow.append({ROW: i, "obj": stringify(obj) if strings else obj})
    return frame, slow, np.array(bad, dtype=np.int64)


def whole_file(texts: list[str], name: str, what: str) -> Any:
    """One JSON document of a file's lines (lines starting with ``#``, a collector's
    ``# source:`` note, read as empty); an ``InputError`` naming ``what`` where it does
    not decode."""
    from logbook.errors import InputError

    body = "\n".join("" if t.lstrip().startswith("#") else t for t in texts)
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{name}: not a readable {what} ({why[:200]})") from None
