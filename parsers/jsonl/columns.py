"""Generic metrics JSONL: key aliases, nested keys, names, and the time column.

Keys are compared in snake_case (``train/loss``, ``train.loss`` and ``train_loss`` are
one name). Nested objects are flattened first, their keys joined with ``/``
(``{"train": {"loss": 1}}`` -> ``train/loss``). The first alias present in a row gives
the canonical column (``step`` before ``iteration``...). Every other numeric key is kept
under its snake_case name, namespaces included: ``train/z_loss`` -> ``train_z_loss``.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.schema import METRIC_COLUMNS

ALIASES: dict[str, tuple[str, ...]] = {
    "step": (
        "step",
        "iteration",
        "global_step",
        "train/global_step",  # the Trainer's step in a W&B run (``_step`` is W&B's count)
        "num_updates",
        "_step",
        "iter",
        "current_steps",  # LLaMA-Factory's trainer_log.jsonl
        "current_step",
        "train_step",
    ),
    "loss": ("loss", "train/loss", "train_loss", "lm_loss", "lm loss", "train/lm_loss"),
    "lr": ("lr", "learning_rate", "optim/lr", "train/lr", "train/learning_rate"),
    "grad_norm": (
        "grad_norm",
        "gnorm",
        "optim/total_grad_norm",
        "train/grad_norm",
        "grad_norm_total",
        "total_grad_norm",
    ),
    "loss_scale": ("loss_scale", "scale", "train/loss_scale"),
    "skipped": ("skipped", "skipped_iterations", "train/skipped"),
    "nan_count": ("nan_count", "nan_iterations", "train/nan_count"),
    "samples": ("samples", "consumed_samples", "train/samples"),
    "tokens": ("tokens", "consumed_tokens", "num_tokens", "tokens_seen", "train/tokens"),
    "batch_size": ("batch_size", "global_batch_size", "train/batch_size"),
    "step_time_s": ("step_time_s", "step_time", "iter_time", "time_per_step"),
    "act_norm": ("act_norm", "actv_norm", "activation_norm"),
    "param_norm": ("param_norm", "params_norm", "parameter_norm", "pnorm"),
    "attn_logit_max": ("attn_logit_max", "max_attn_logit"),
    "logz": ("logz", "log_z"),
}
TIME_KEYS = ("time", "timestamp", "_timestamp", "datetime")
# evaluation keys: eval_*/val_*/test_*, and detectron2's COCO metrics (bbox/AP, segm/AP50)
# evaluation metrics: by prefix (``eval_loss``), or an evaluator's namespace (detectron2's
# ``bbox/AP``, mmengine's ``accuracy/top1``, ``coco/bbox_mAP``, ``pascal_voc/mAP``, ``mIoU``)
EVAL = re.compile(
    r"^(eval|val|valid|validation|test)_|^(bbox|segm|keypoints|sem_seg|panoptic)_"
    r"|^(accuracy|coco|pascal_voc|voc|cityscapes|ade20k|lvis)_|^(m_?iou|a_?acc|m_?acc)$"
)

MAPS = ", ".join(f"{'|'.join(keys)}->{col}" for col, keys in ALIASES.items()) + (
    f", {'|'.join(TIME_KEYS)} (unix seconds/ms or ISO 8601)->time; other numeric keys kept"
    " as snake_case columns, nested keys joined with /"
)


def flatten(df: pl.DataFrame, sep: str = "/") -> tuple[pl.DataFrame, dict[str, str]]:
    """Nested struct columns become one column per leaf, keys joined with ``sep``.

    Returns the frame and each column's key path; a path met twice (``{"a": {"b": 1}}``
    and ``"a/b"`` in one file) gets a numbered column, and both keep the same path."""
    paths = {c: c for c in df.columns}
    while any(isinstance(t, pl.Struct) for t in df.schema.values()):
        cols: list[pl.Expr] = []
        new: dict[str, str] = {}
        for name, dtype in df.schema.items():
            leaves = (
                [
                    (pl.col(name).struct.field(f.name), f"{paths[name]}{sep}{f.name}")
                    for f in dtype.fields
                ]
                if isinstance(dtype, pl.Struct)
                else [(pl.col(name), paths[name])]
            )
            for expr, path in leaves:
                col = path if path not in new else f"{path}#{len(new)}"
                new[col] = path
                cols.append(expr.alias(col))
        df, paths = df.select(cols), new
    return df, paths


def as_number(col: pl.Expr, dtype: pl.DataType) -> pl.Expr | None:
    """A column as Float64 (numbers, and numeric text such as "NaN" or "1e-4"), or None
    when it cannot hold numbers (booleans, lists, nulls only)."""
    if dtype.is_numeric():
        return col.cast(pl.Float64)
    if dtype == pl.String:
        return col.cast(pl.Float64, strict=False)
    return None


def _epoch(v: pl.Expr) -> pl.Expr:
    """Unix time in s, ms, us or ns (told apart by magnitude; before 1973 is no time)."""
    us = (
        pl.when(v >= 1e17)
        .then(v / 1e3)
        .when(v >= 1e14)
        .then(v)
        .when(v >= 1e11)
        .then(v * 1e3)
        .when(v >= 1e8)
        .then(v * 1e6)
    )
    us = pl.when(us.abs() < 2.0**62).then(us)  # a time beyond year 146,000: none
    return pl.from_epoch(
        us.round(0).cast(pl.Int64, strict=False), time_unit="us"
    ).dt.replace_time_zone("UTC")


def timestamps(col: pl.Expr, dtype: pl.DataType) -> pl.Expr | None:
    """A wall-clock column: unix time or ISO 8601 text (a zone-less time is UTC)."""
    if dtype.is_numeric():
        return _epoch(col.cast(pl.Float64))
    if dtype != pl.String:
        return None
    utc = {"time_zone": "UTC", "time_unit": "us", "strict": False}
    text = col.str.strip_chars().str.replace(r"Z$", "+00:00").str.replace("T", " ")
    return pl.coalesce(
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f%z", **utc),
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", **utc),
        _epoch(col.cast(pl.Float64, strict=False)),
    )


def canonical(name: str) -> bool:
    return name in METRIC_COLUMNS
