"""The ``key: value |`` fields of Megatron-family records, read into typed columns.

A record is ``iteration N/ M | key: value | key: value | ... |``. The records of one
log share a handful of layouts (the same keys at the same places, with and without
``lm loss``, ...). Each layout is read in one go: split every record on ``|``, check
that each piece starts with the layout's ``key:``, slice the values off and cast them.
Records that fit none of the first ``MAX_LAYOUTS`` layouts take a slower path that
explodes their pieces. Keys are matched with their spaces removed, so that a record
hard-wrapped inside a key (``number of nan\\niterations``) still lands in its column.
Only fields closed by ``|`` are read: the fragment after the last ``|`` of a record cut
mid-line is left out rather than guessed at.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.schema import METRIC_COLUMNS
from parsers._megatron_lines import PREFIX, vx

MAX_LAYOUTS = 16
ITERATION = "\0iteration"  # layout mark of the ``iteration N/ M`` piece
_STAMP = r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]"
_ITERATION_PIECE = re.compile(PREFIX + r"iteration\s+(?P<step>\d+)\s*/\s*(?P<total>\d+)\s*$")
MAX_FIELDS = 64

# Keys (lower case, spaces removed, so that wrapped records match too) -> column.
CANONICAL = {
    "lmloss": "loss",
    "lm_loss": "loss",
    "loss": "loss",
    "learningrate": "lr",
    "gradnorm": "grad_norm",
    "lossscale": "loss_scale",
    "numberofskippediterations": "skipped",
    "numberofnaniterations": "nan_count",
    "consumedsamples": "samples",
    "consumedtokens": "tokens",
    "globalbatchsize": "batch_size",
    "elapsedtimeperiteration(ms)": "step_time_s",
    "elapsedtimeperiteration(s)": "step_time_s",
    "paramsnorm": "param_norm",
    "samples/sec": "samples_per_second",
    "samplespersecond": "samples_per_second",
    "tokenspergpupersecond(tgs)": "tgs",
    "approxflopspergpu": "tflops",
    "tflops": "tflops",
    "throughputpergpu(tflop/s/gpu)": "throughput_per_gpu",
}
DIVISOR = {"elapsedtimeperiteration(ms)": 1000.0}  # ms -> s
INT_COLUMNS = {
    "skipped",
    "nan_count",
    "samples",
    "tokens",
    "batch_size",
    "curriculum_seqlen",
    "actual_seqlen",
    "skipped_samples",
}
_RESERVED = set(METRIC_COLUMNS) | {"type", "kind", "text", "nlines", "train_iters"}
_NUMBER = r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_FLOPS_UNIT = {"T": 1.0, "G": 1e-3, "P": 1e3, "M": 1e-6}


def _nospace(key: str) -> str:
    return re.sub(r"\s+", "", key).lower()


def column_name(key: str) -> str:
    """The column a record key goes to: canonical name, or the key in snake_case."""
    canon = CANONICAL.get(_nospace(key))
    if canon:
        return canon
    name = re.sub(r"\([^)]*\)", "", key)
    name = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower()
    name = name or "field"
    return f"{name}_field" if name in _RESERVED else name


def read_fields(body: pl.Series) -> pl.DataFrame:
    """The typed fields of each record (see :func:`typed_columns`), plus ``_idx``
    (position in ``body``), ``_cut`` (True when text follows the record's last ``|``:
    the line was cut), ``_loss_absent`` and, where the layout shows them, ``_step``,
    ``_total`` and ``_ts`` (time stamp text)."""
    n = body.len()
    if n == 0:
        return pl.DataFrame(
            schema={"_idx": pl.Int64, "_cut": pl.Boolean, "_loss_absent": pl.Boolean}
        )
    parts = _split(body)
    out: list[pl.DataFrame] = []
    remaining = parts
    for _ in range(MAX_LAYOUTS):
        if remaining.height == 0:
            break
        layout = _layout(remaining.row(0, named=True), MAX_FIELDS)
        if layout is None:
            break
        ok = remaining.select(_fits(layout)).to_series()
        out.append(_values(remaining.filter(ok), layout))
        remaining = remaining.filter(~ok)
    if remaining.height:
        idx = remaining.get_column("_idx")
        out.append(_typed(_slow(body.gather(idx), idx)))
    if len(out) == 1:
        return out[0]
    return pl.concat(out, how="diagonal_relaxed").sort("_idx")


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


def _typed(raw: pl.DataFrame) -> pl.DataFrame:
    """One layout's raw values typed; whether its records lack a loss field."""
    marks = [c for c in raw.columns if c.startswith("_")]
    loss_keys = [k for k in raw.columns if not k.startswith("_") and column_name(k) == "loss"]
    absent = (
        pl.all_horizontal(pl.col(k).is_null() for k in loss_keys) if loss_keys else pl.lit(True)
    )
    head = raw.select(*marks, absent.alias("_loss_absent"))
    return pl.concat([head, typed_columns(raw)], how="horizontal")


def _layout(row: dict, width: int) -> tuple[int, list[tuple[int, str | None]]] | None:
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
        else:
            pieces.append((j, None))
    return nb, pieces


def _fits(layout: tuple[int, list[tuple[int, str | None]]]) -> pl.Expr:
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


def _values(hit: pl.DataFrame, layout: tuple[int, list[tuple[int, str | None]]]) -> pl.DataFrame:
    """One layout's records typed: each value sliced off its piece and cast in one go;
    only a column with values the cast could not read takes a second, slower look."""
    nb, pieces = layout
    exprs = [pl.col("_idx"), (pl.col(f"field_{nb}").str.strip_chars() != "").alias("_cut")]
    raw: dict[str, pl.Expr] = {}
    for j, prefix in pieces:
        if prefix == ITERATION and "_step" not in raw:
            raw["_step"] = pl.lit(None)
            exprs += _iteration_piece(hit.get_column(f"field_{j}"))
        if prefix is None or prefix == ITERATION:
            continue
        key = prefix[:-1].strip()
        if key in raw or not key:
            continue
        raw[key] = pl.col(f"field_{j}").str.slice(len(prefix)).str.strip_chars()
        exprs.append(_fast_cast(raw[key], column_name(key)).alias(key))
    raw.pop("_step", None)
    fast = hit.select(exprs)
    loss = [k for k in raw if column_name(k) == "loss"]
    fast = fast.with_columns(_loss_absent=pl.lit(not loss))
    # a value is there for every record of the layout: a null is a value the cast missed
    missed = [k for k in raw if fast.get_column(k).null_count()]
    if missed:
        texts = hit.select(raw[k].alias(k) for k in missed)
        again = [typed_columns(texts.select(k)).to_series().alias(k) for k in missed]
        fast = fast.with_columns(again)
    cols: dict[str, list[pl.Series]] = {}
    for k in raw:
        col = fast.get_column(k)
        col = col if k in missed else _scaled(col, _nospace(k))
        cols.setdefault(column_name(k), []).append(col)
    marks = fast.select(c for c in fast.columns if c.startswith("_"))
    return marks.with_columns(_merged(cols))


def _merged(cols: dict[str, list[pl.Series]]) -> list[pl.Series]:
    """One series per column: keys that map to the same column (``lm loss`` and
    ``lm_loss``, ms and s) coalesced."""
    return [
        (v[0] if len(v) == 1 else pl.select(pl.coalesce(v)).to_series()).alias(name)
        for name, v in cols.items()
    ]


def _iteration_piece(piece: pl.Series) -> list[pl.Expr]:
    """``_step``, ``_total`` and ``_ts`` (the time stamp, when the pieces have one) from
    the ``[prefixes] [time] iteration N/ M`` piece, without a regex where none is needed."""
    col = pl.col(piece.name)
    halves = col.str.split_exact("/", 1)
    step = halves.struct.field("field_0").str.extract(vx(r"(\d+)\s*$"), 1)
    total = halves.struct.field("field_1").str.strip_chars()
    exprs = [
        step.cast(pl.Int64, strict=False).alias("_step"),
        total.cast(pl.Int64, strict=False).alias("_total"),
    ]
    if piece.str.contains(vx(_STAMP)).any():
        return [*exprs, col.str.extract(vx(_STAMP), 1).alias("_ts")]
    return [*exprs, pl.lit(None, dtype=pl.String).alias("_ts")]


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


def typed_columns(raw: pl.DataFrame) -> pl.DataFrame:
    """Map raw keys to columns and cast: canonical names and units (ms -> s), ints
    where the schema has ints, floats otherwise (strings when nothing is numeric)."""
    keys = [k for k in raw.columns if not k.startswith("_")]
    names = {k: column_name(k) for k in keys}
    fast = raw.select(_fast_cast(pl.col(k), names[k]).alias(k) for k in keys)
    # values the plain cast could not read (units, odd spellings): a slower second look
    slow = raw.select(
        (pl.col(k).is_not_null() & fast.get_column(k).is_null()).any().alias(k) for k in keys
    )
    cols: dict[str, list[pl.Series]] = {}
    for k in keys:
        col = fast.get_column(k)
        if slow.get_column(k).item() or names[k] == "tflops":
            col = raw.select(_slow_cast(pl.col(k), names[k]).alias(k)).to_series()
        col = _scaled(col, _nospace(k))
        if col.null_count() == col.len() and names[k] not in METRIC_COLUMNS:
            col = raw.get_column(k).str.strip_chars()  # nothing numeric: keep the text
        cols.setdefault(names[k], []).append(col)
    out = _merged(cols)
    return pl.DataFrame(out) if out else pl.DataFrame()


def _fast_cast(col: pl.Expr, name: str) -> pl.Expr:
    return col.cast(pl.Int64 if name in INT_COLUMNS else pl.Float64, strict=False)


def _slow_cast(col: pl.Expr, name: str) -> pl.Expr:
    number = col.str.extract(vx(_NUMBER), 1).cast(pl.Float64, strict=False)
    if name in INT_COLUMNS:
        return pl.coalesce(col.cast(pl.Int64, strict=False), number.cast(pl.Int64, strict=False))
    value = pl.coalesce(col.cast(pl.Float64, strict=False), number)
    if name == "tflops":
        unit = col.str.extract(r"([KMGTP])FLOPS", 1)
        factor = unit.replace_strict(_FLOPS_UNIT, default=1.0, return_dtype=pl.Float64)
        value = value * factor.fill_null(1.0)
    return value


def _scaled(col: pl.Series, key: str) -> pl.Series:
    """Unit conversion; rounded so that 21847.9 ms is 21.8479 s, not 21.847900000000003."""
    return (col / DIVISOR[key]).round(9) if key in DIVISOR else col
