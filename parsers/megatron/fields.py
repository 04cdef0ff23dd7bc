"""Record keys and values of Megatron-family logs: which column a key goes to, and how
its text values are typed (canonical names, units, ints where the schema has ints).

Keys are matched with their spaces removed and in lower case, so that a record
hard-wrapped inside a key (``number of nan\\niterations``) still lands in its column.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.schema import METRIC_COLUMNS
from parsers.megatron.lines import vx

# Keys (lower case, spaces removed, so that wrapped records match too) -> column.
CANONICAL = {
    "lmloss": "loss",
    "lm_loss": "loss",
    "lm-loss": "loss",  # early Megatron-DeepSpeed
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


def nospace(key: str) -> str:
    """The key as :data:`CANONICAL` and :data:`DIVISOR` spell it."""
    return re.sub(r"\s+", "", key).lower()


def column_name(key: str) -> str:
    """The column a record key goes to: canonical name, or the key in snake_case."""
    canon = CANONICAL.get(nospace(key))
    if canon:
        return canon
    name = re.sub(r"\([^)]*\)", "", key)
    name = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower()
    name = name or "field"
    return f"{name}_field" if name in _RESERVED else name


def typed_columns(raw: pl.DataFrame) -> pl.DataFrame:
    """Map raw keys to columns and cast: canonical names and units (ms -> s), ints
    where the schema has ints, floats otherwise (strings when nothing is numeric)."""
    keys = [k for k in raw.columns if not k.startswith("_")]
    names = {k: column_name(k) for k in keys}
    fast = raw.select(fast_cast(pl.col(k), names[k]).alias(k) for k in keys)
    # values the plain cast could not read (units, odd spellings): a slower second look
    slow = raw.select(
        (pl.col(k).is_not_null() & fast.get_column(k).is_null()).any().alias(k) for k in keys
    )
    cols: dict[str, list[pl.Series]] = {}
    for k in keys:
        col = fast.get_column(k)
        if slow.get_column(k).item() or names[k] == "tflops":
            col = raw.select(_slow_cast(pl.col(k), names[k]).alias(k)).to_series()
        col = scaled(col, nospace(k))
        if col.null_count() == col.len() and names[k] not in METRIC_COLUMNS:
            col = raw.get_column(k).str.strip_chars()  # nothing numeric: keep the text
        cols.setdefault(names[k], []).append(col)
    out = merged(cols)
    return pl.DataFrame(out) if out else pl.DataFrame()


def merged(cols: dict[str, list[pl.Series]]) -> list[pl.Series]:
    """One series per column: keys that map to the same column (``lm loss`` and
    ``lm_loss``, ms and s) coalesced."""
    return [
        (v[0] if len(v) == 1 else pl.select(pl.coalesce(v)).to_series()).alias(name)
        for name, v in cols.items()
    ]


def fast_cast(col: pl.Expr, name: str) -> pl.Expr:
    """The plain cast of a stripped value: Int64 for the schema's int columns."""
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


def scaled(col: pl.Series, key: str) -> pl.Series:
    """Unit conversion; rounded so that 21847.9 ms is 21.8479 s, not 21.847900000000003."""
    return (col / DIVISOR[key]).round(9) if key in DIVISOR else col
