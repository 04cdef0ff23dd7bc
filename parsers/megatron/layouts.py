"""The ``key: value |`` fields of Megatron-family records, read layout by layout.

A record is ``iteration N/ M | key: value | key: value | ... |``. The records of one
log share a handful of layouts (the same keys at the same places, with and without
``lm loss``, ...). Each layout is read in one go: split every record on ``|`` into
columns of pieces, check that each piece starts with the layout's ``key:``, slice the
values off and cast them. Records that fit none of the first ``MAX_LAYOUTS`` layouts
take a slower path that explodes their pieces. Only fields closed by ``|`` are read:
the fragment after the last ``|`` of a record cut mid-line is left out rather than
guessed at.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from parsers.megatron.fields import (
    column_name,
    fast_cast,
    merged,
    nospace,
    scaled,
    typed_columns,
)
from parsers.megatron.lines import PREFIX, vx

MAX_LAYOUTS = 16
MAX_FIELDS = 64
ITERATION = "\0iteration"  # layout mark of the ``iteration N/ M`` piece
_STAMP = r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]"
_ITERATION_PIECE = re.compile(PREFIX + r"iteration\s+(?P<step>\d+)\s*/\s*(?P<total>\d+)\s*$")
_STEP_TAIL = vx(r"(\d+)\s*$")
# a field without a colon, as early Megatron forks print them: words, then the value
_BARE_FIELD = re.compile(
    r"^(\s*[A-Za-z][A-Za-z ()/_.-]*?\s+)(?:[-+]?(?:\d|\.\d)|(?i:nan|inf))\S*\s*$"
)
# Share of the open records a layout must fit for its values to be read on all of them
# (one pass, the misfits' values dropped after) rather than on the fitting ones only.
_READ_ALL = 0.5

Layout = tuple[int, list[tuple[int, str | None]]]


def read_fields(body: pl.Series) -> pl.DataFrame:
    """The typed fields of each record (see :func:`typed_columns`), in record order,
    plus ``_idx`` (position in ``body``), ``_cut`` (True when text follows the record's
    last ``|``: the line was cut), ``_loss_absent`` and, where the layout shows them,
    ``_step`` and ``_ts`` (time stamp text)."""
    n = body.len()
    if n == 0:
        return pl.DataFrame(
            schema={"_idx": pl.Int64, "_cut": pl.Boolean, "_loss_absent": pl.Boolean}
        )
    remaining = _split(body)
    base: pl.DataFrame | None = None  # the first layout read on every record
    out: list[pl.DataFrame] = []
    for _ in range(MAX_LAYOUTS):
        if remaining.height == 0:
            break
        layout = _layout(remaining.row(0, named=True), MAX_FIELDS)
        if layout is None:
            break
        ok = remaining.select(_fits(layout)).to_series()
        n_ok = int(ok.sum())
        if n_ok == remaining.height:
            out.append(_values(remaining, layout, None))
            remaining = remaining.clear()
            break
        if n_ok >= _READ_ALL * remaining.height:
            got = _values(remaining, layout, ok)
            if base is None and not out and got.height == n:
                base = got  # the other layouts' records are written over it
            else:
                out.append(got.filter(ok) if got.height > n_ok else got)
        else:
            out.append(_values(remaining.filter(ok), layout, None))
        remaining = remaining.filter(~ok)
    if remaining.height:
        idx = remaining.get_column("_idx")
        out.append(_typed(_slow(body.gather(idx), idx)))
    return _in_order(out) if base is None else _written_over(base, out)


def _in_order(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The layouts' frames as one, rows back in record order (columns and types as a
    diagonal concatenation gives them)."""
    frame = pl.concat(parts, how="diagonal_relaxed") if len(parts) > 1 else parts[0]
    idx = frame.get_column("_idx")
    if idx.is_sorted():
        return frame
    return frame[np.argsort(idx.to_numpy(), kind="stable")]


def _written_over(base: pl.DataFrame, parts: list[pl.DataFrame]) -> pl.DataFrame:
    """``base`` (a row for every record, in order) with the records of ``parts``
    written over its rows: the frame :func:`_in_order` would give for ``base`` without
    those rows and ``parts``, without moving the rows of ``base``."""
    if not parts:
        return base
    schema = pl.concat([f.clear() for f in (base, *parts)], how="diagonal_relaxed").schema
    cols = []
    for name, dtype in schema.items():
        col = column(base, name, dtype)
        for part in parts:
            col = col.scatter(part.get_column("_idx"), column(part, name, dtype))
        cols.append(col)
    return pl.DataFrame(cols)


def column(frame: pl.DataFrame, name: str, dtype: pl.DataType) -> pl.Series:
    """Column ``name`` of ``frame`` as ``dtype``; all null where the frame has none."""
    if name in frame.columns:
        return frame.get_column(name).cast(dtype)
    return pl.repeat(None, frame.height, dtype=dtype, eager=True).alias(name)


def _split(body: pl.Series) -> pl.DataFrame:
    """Each record's pieces between ``|`` (``field_0`` ...), its number of ``|``
    (``_nbars``; more than ``MAX_FIELDS`` counts as ``MAX_FIELDS + 1``) and ``_idx``."""
    sample = body.head(1000).str.count_matches("|", literal=True).max() or 1
    width = min(int(sample), MAX_FIELDS) + 1
    parts = pl.DataFrame({"b": body}).select(pl.col("b").str.split_exact("|", width)).unnest("b")
    if parts.get_column(f"field_{width}").null_count() < body.len() and width <= MAX_FIELDS:
        width = MAX_FIELDS + 1  # a longer record than the sample shows: split wider
        parts = pl.DataFrame({"b": body}).select(pl.col("b").str.split_exact("|", width))
        parts = parts.unnest("b")
    # split_exact pads with nulls: the pieces present give the number of bars
    present = pl.sum_horizontal(pl.col(f"field_{j}").is_not_null() for j in range(1, width + 1))
    return parts.with_columns(
        pl.int_range(body.len(), dtype=pl.Int64).alias("_idx"), present.alias("_nbars")
    )


def _layout(row: dict, width: int) -> Layout | None:
    """(number of ``|``, [(piece, ``key:`` it starts with, or ITERATION, or None)])."""
    nb = row["_nbars"]
    if nb > width:
        return None
    pieces: list[tuple[int, str | None]] = []
    for j in range(nb):
        piece = row[f"field_{j}"]
        cut = piece.find(":")
        if _ITERATION_PIECE.match(piece):
            pieces.append((j, ITERATION))
        elif cut >= 0:
            pieces.append((j, piece[: cut + 1]))
        elif m := _BARE_FIELD.match(piece):  # an early layout: ``lm loss 6.758929E+00``
            pieces.append((j, m.group(1)))
        else:
            pieces.append((j, None))
    return nb, pieces


def _fits(layout: Layout) -> pl.Expr:
    nb, pieces = layout
    conds = [pl.col("_nbars") == nb]
    for j, prefix in pieces:
        col = pl.col(f"field_{j}")
        if prefix is None:
            conds.append(~col.str.contains(":", literal=True))
        elif prefix == ITERATION:  # (the record line was checked whole when it was found)
            conds.append(col.str.contains("iteration", literal=True))
        else:
            conds.append(col.str.starts_with(prefix))
    return pl.all_horizontal(conds)


def _values(parts: pl.DataFrame, layout: Layout, ok: pl.Series | None) -> pl.DataFrame:
    """One layout's records typed: each value sliced off its piece and cast in one go;
    only a column with values the cast could not read takes a second, slower look.
    ``ok`` (when given) marks the rows of ``parts`` that fit the layout: the values are
    read on all rows in one pass; the frame keeps every row of ``parts`` (the others
    hold what the layout made of them) unless a column needed the second look, then
    only the fitting ones."""
    nb, pieces = layout
    exprs = [pl.col("_idx"), (pl.col(f"field_{nb}").str.strip_chars() != "").alias("_cut")]
    raw: dict[str, pl.Expr] = {}
    step_piece = None
    for j, prefix in pieces:
        if prefix == ITERATION and "_step" not in raw:
            raw["_step"] = pl.lit(None)
            got, quick = _iteration_piece(parts.get_column(f"field_{j}"))
            exprs += got
            step_piece = f"field_{j}" if quick else None
        if prefix is None or prefix == ITERATION:
            continue
        key = prefix.strip().removesuffix(":").strip()
        if key in raw or not key:
            continue
        raw[key] = pl.col(f"field_{j}").str.slice(len(prefix)).str.strip_chars()
        exprs.append(fast_cast(raw[key], column_name(key)).alias(key))
    raw.pop("_step", None)
    fast = parts.select(exprs)
    if step_piece is not None:
        fast = _exact_steps(fast, parts.get_column(step_piece))
    loss = [k for k in raw if column_name(k) == "loss"]
    fast = fast.with_columns(_loss_absent=pl.lit(not loss))
    # a value is there for every record of the layout: a null is a value the cast missed
    missed = [k for k in raw if _nulls(fast, k, ok)]
    if missed:
        if ok is not None:
            fast, parts = fast.filter(ok), parts.filter(ok)
        texts = parts.select(raw[k].alias(k) for k in missed)
        again = [typed_columns(texts.select(k)).to_series().alias(k) for k in missed]
        fast = fast.with_columns(*again, _unreadable(texts, again, texts.height))
    cols: dict[str, list[pl.Series]] = {}
    for k in raw:
        col = fast.get_column(k)
        col = col if k in missed else scaled(col, nospace(k))
        cols.setdefault(column_name(k), []).append(col)
    marks = fast.select(c for c in fast.columns if c.startswith("_"))
    return marks.with_columns(merged(cols))


def _nulls(fast: pl.DataFrame, key: str, ok: pl.Series | None) -> int:
    """Nulls in column ``key`` of ``fast`` on the rows ``ok`` marks (all when None)."""
    nulls = fast.get_column(key).null_count()
    if ok is None or not nulls:
        return nulls
    return nulls - fast.get_column(key).filter(~ok).null_count()


def _iteration_piece(piece: pl.Series) -> tuple[list[pl.Expr], bool]:
    """``_step`` and ``_ts`` (the time stamp, when the pieces have one) from the
    ``[prefixes] [time] iteration N/ M`` piece, and whether the step was read the quick
    way (to be checked by :func:`_exact_steps`): when the layout's first piece has no
    prefix, the step is what is left of the text before the ``/`` once the text up to
    ``iteration`` that this piece starts with and the spaces are taken off; else a
    regex reads it. (The planned total ``M`` is read off the last record only: see
    ``parsers.megatron``.)"""
    col = pl.col(piece.name)
    head = col.str.head(col.str.find("/", literal=True))
    first = str(piece[0])
    lead = first[: first.find("iteration") + len("iteration")]
    quick = lead.strip(" \t") == "iteration"
    if quick:
        step = head.str.strip_prefix(lead).str.strip_chars(" \t")
    else:
        step = head.str.extract(_STEP_TAIL, 1)
    exprs = [step.cast(pl.Int64, strict=False).alias("_step")]
    stamped = piece.str.contains("[", literal=True).any() and piece.str.contains(vx(_STAMP)).any()
    if stamped:
        return [*exprs, col.str.extract(vx(_STAMP), 1).alias("_ts")], quick
    return [*exprs, pl.lit(None, dtype=pl.String).alias("_ts")], quick


def _exact_steps(fast: pl.DataFrame, piece: pl.Series) -> pl.DataFrame:
    """Steps the quick reading could not give (a prefix before ``iteration``, a sign)
    read as the digits that end the text before the ``/`` (``piece``: the text with
    the step of each row of ``fast``)."""
    step = fast.get_column("_step")
    bad = step.is_null() | (step < 0)
    if not bad.any():
        return fast
    head = piece.str.split_exact("/", 1).struct.field("field_0")
    exact = head.str.extract(_STEP_TAIL, 1).cast(pl.Int64, strict=False)
    steps = pl.select(pl.when(bad).then(exact).otherwise(step)).to_series()
    return fast.with_columns(steps.alias("_step"))


def _typed(raw: pl.DataFrame) -> pl.DataFrame:
    """One layout's raw values typed; whether its records lack a loss field."""
    marks = [c for c in raw.columns if c.startswith("_")]
    loss_keys = [k for k in raw.columns if not k.startswith("_") and column_name(k) == "loss"]
    absent = (
        pl.all_horizontal(pl.col(k).is_null() for k in loss_keys) if loss_keys else pl.lit(True)
    )
    head = raw.select(*marks, absent.alias("_loss_absent"))
    keys = [k for k in raw.columns if not k.startswith("_")]
    each = [typed_columns(raw.select(k)) for k in keys]  # (keys are typed one by one)
    typed = [t.to_series() for t in each]
    head = head.with_columns(_unreadable(raw.select(keys), typed, raw.height))
    cols: dict[str, list[pl.Series]] = {}
    for t in each:
        for col in t.get_columns():
            cols.setdefault(col.name, []).append(col)
    return pl.concat([head, pl.DataFrame(merged(cols))], how="horizontal")


def _unreadable(texts: pl.DataFrame, typed: list[pl.Series], height: int) -> pl.Series:
    """``_unread``: how many values of each record were printed but read as nothing
    (``grad norm: abc``): the record keeps them empty, a caveat counts them (``typed``:
    the columns of ``texts`` typed, in its order; ``height``: the records, since a
    layout with no keys at all gives ``texts`` no columns and so no height)."""
    if not typed:
        return pl.repeat(0, height, dtype=pl.UInt32, eager=True).alias("_unread")
    bad = [
        (raw.is_not_null() & (raw != "") & t.is_null())
        for raw, t in zip(texts.get_columns(), typed, strict=True)
    ]
    return (
        pl.DataFrame(bad)
        .select(pl.sum_horizontal(pl.all()).cast(pl.UInt32))
        .to_series()
        .alias("_unread")
    )


def _slow(body: pl.Series, idx: pl.Series) -> pl.DataFrame:
    """Records of rare layouts: explode their pieces into (record, key, value)."""
    frame = pl.DataFrame({"p": body.str.split("|"), "_i": idx})
    cut = frame.select(
        "_i", (pl.col("p").list.last().str.strip_chars() != "").fill_null(False).alias("_cut")
    )
    long = (
        frame.with_columns(pl.col("p").list.head(pl.col("p").list.len() - 1))
        .explode("p")
        .with_columns(pl.col("p").str.split_exact(":", 1).alias("kv"))
        .unnest("kv")
        .select(
            "_i",
            pl.col("field_0").str.strip_chars().alias("key"),
            pl.col("field_1").str.strip_chars().alias("value"),
        )
        .filter(pl.col("value").is_not_null() & (pl.col("key") != ""))
    )
    if long.height:
        wide = long.pivot(on="key", index="_i", values="value", aggregate_function="first")
        cut = cut.join(wide, on="_i", how="left")
    return cut.rename({"_i": "_idx"})
