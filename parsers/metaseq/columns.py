"""metaseq/fairseq metric keys -> logbook columns, shared by the JSON and simple formats.

Both frameworks log every value as text (``"loss": "12.291"``, ``loss=12.291``) and the
loss in bits (base 2; ``ppl`` = 2 ** loss). Records become canonical columns, with
``loss`` and ``nll_loss`` converted to nats; every other numeric key keeps its own name,
made snake_case (``gnorm_layer3``, ``cuda_gb_free``, ``wpb``).
"""

from __future__ import annotations

import math
import re
from typing import Any

import polars as pl

LN2 = math.log(2.0)
BITS_TO_NATS = "bits -> nats (x ln 2)"

# framework key -> logbook column
RENAME = {
    "num_updates": "step",
    "gnorm": "grad_norm",
    "actv_norm": "act_norm",
    "bsz": "batch_size",
}
BITS = ("loss", "nll_loss")  # logged in bits, stored in nats
INTEGER = ("step", "batch_size", "epoch")

MAPS = (
    "num_updates->step, loss (bits)->loss (nats), nll_loss (bits)->nll_loss (nats), lr->lr, "
    "gnorm->grad_norm, loss_scale->loss_scale, actv_norm->act_norm, bsz->batch_size, "
    "line timestamp->time; other numeric keys (ppl, wps, ups, wpb, wall, train_wall, clip, "
    "gnorm_layerN, pos_norm, ...) kept under their snake_case names"
)


def snake(key: str) -> str:
    """A key as a column name: lower case, anything but letters, digits and ``_`` -> ``_``."""
    name = re.sub(r"[^0-9a-zA-Z_]", "_", key.strip()).lower()
    return name or "_"


def _column(name: str, col: pl.Expr) -> pl.Expr:
    value = col.cast(pl.Float64, strict=False)
    if name in BITS:
        value = value * LN2
    if name in INTEGER:
        value = value.round(0).cast(pl.Int64, strict=False)
    return value.alias(name)


def to_metrics(raw: pl.DataFrame, keep: tuple[str, ...] = ("line", "time")) -> pl.DataFrame:
    """Text-valued framework columns -> typed logbook columns.

    Columns without a single numeric value are dropped (text, not metrics); ``keep``
    columns pass through unchanged. When two keys land on one name, the first wins.
    """
    # columns by position: a key such as ``^a.*$`` would be a pattern to pl.col
    texts = [i for i, c in enumerate(raw.columns) if c not in keep]
    numbers = raw.select(pl.nth(i).cast(pl.Float64, strict=False) for i in texts)
    exprs: dict[str, pl.Expr] = {}
    for i, c in enumerate(numbers.columns):
        if numbers.to_series(i).null_count() == numbers.height:
            continue
        name = RENAME.get(c, snake(c))
        if name not in exprs:
            exprs[name] = _column(name, pl.nth(i))
    kept = raw.select(k for k in keep if k in raw.columns)
    return pl.concat([kept, numbers.select(*exprs.values())], how="horizontal")


_CAVEAT_ROWS = 20_000  # rows the nats/bits check reads, at most


def base_caveats(metrics: pl.DataFrame) -> list[str]:
    """A warning when ``ppl`` says the logged loss was in nats, not bits (a criterion
    that logs natural-log losses): ``ppl`` is 2**loss for bits, e**loss for nats."""
    if "ppl" not in metrics.columns or "loss" not in metrics.columns:
        return []
    logged = pl.col("loss") / LN2
    ok = (pl.col("ppl") > 1) & pl.col("ppl").is_finite() & logged.is_finite()
    # a median error over evenly spread rows tells as well as over millions
    every = max(1, metrics.height // _CAVEAT_ROWS)
    sample = metrics.select("ppl", "loss").gather_every(every) if every > 1 else metrics
    err = sample.filter(ok).select(
        (pl.col("ppl").log(2) - logged).abs().median().alias("bits"),
        (pl.col("ppl").log() - logged).abs().median().alias("nats"),
    )
    bits, nats = err.row(0) if err.height else (None, None)
    if bits is None or nats is None or nats >= bits / 10:
        return []
    return ["ppl = e**loss in this log: its loss looks like nats, yet was read as bits"]


def units(metrics: pl.DataFrame) -> dict[str, str]:
    """The unit conversions applied to the columns present."""
    return {c: BITS_TO_NATS for c in BITS if c in metrics.columns}


def values(obj: dict[str, Any], prefix: str) -> tuple[int | None, dict[str, float | None]]:
    """A validation record's step and numeric values: ``<prefix>_`` dropped from keys,
    loss and nll_loss in nats, epoch and num_updates left out of the values."""
    step: int | None = None
    out: dict[str, float | None] = {}
    for key, raw in obj.items():
        name = key[len(prefix) + 1 :] if key.startswith(prefix + "_") else key
        number = _number(raw)
        if name == "num_updates":
            step = int(round(number)) if number is not None and math.isfinite(number) else None
            continue
        if name == "epoch" or number is None:
            continue
        out[snake(name)] = number * LN2 if name in BITS else number
    return step, out


def _number(raw: Any) -> float | None:
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None
