"""YOLOv3/v5 (before 6.0) and YOLOv7 ``results.txt``: one row an epoch, no header::

      0/54     12.8G   0.03604    0.2529         0    0.2889        19       640   0.04946 ...

The columns are fixed by the trainer: the epoch of its last (``0/54``, from 0), the GPU
memory, the epoch's mean box, objectness, class and total losses, the labels of the
last batch, the image size, then the validation's precision, recall, mAP@.5,
mAP@.5:.95 and its box, objectness and class losses. The epoch is the step; the total
loss is the loss.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from parsers.columns import with_core

NAME = "yolo-results"
DESCRIPTION = "YOLOv5 (before 6.0) / YOLOv7 results.txt: one row an epoch, no header"
EXAMPLE = (
    "      0/54     12.8G   0.03604    0.2529         0    0.2889        19       640"
    "   0.04946   0.03419   0.00595  0.001898   0.03685  0.004025         0"
)
MAPS = (
    "epoch (0/54)->step and epoch, total loss->loss, box/obj/cls losses, gpu_mem_gb, "
    "labels, img_size, precision, recall, map50, map50_95, val_box/obj/cls_loss"
)
SNIFF_MAX = 70
MIN_ROWS = 3

_EPOCH = re.compile(r"^(\d{1,9})/(\d{1,9})$")
_MEM = re.compile(r"^(\d+\.?\d*)([GMK]?)$", re.IGNORECASE)
_VAL7 = ("precision", "recall", "map50", "map50_95", "val_box_loss", "val_obj_loss", "val_cls_loss")
_GB = {"G": 1.0, "M": 1e-3, "K": 1e-6, "": 1.0}


_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf)$", re.IGNORECASE)


def _number(token: str) -> float | None:
    return float(token) if _NUMBER.match(token) else None


def _row(text: str) -> dict | None:
    """One row's values, or None when the line is not of the layout. The losses end at
    the labels count and the image size (a multiple of 32), whatever their number (4 in
    YOLOv5, 5 in yolov5-face with its landmark loss, the last being the total)."""
    tokens = text.split()
    if len(tokens) < 13 or not (e := _EPOCH.match(tokens[0])) or not (m := _MEM.match(tokens[1])):
        return None
    values = [_number(t) for t in tokens[2:]]
    if any(v is None for v in values):
        return None
    for i in range(3, min(7, len(values) - 5)):
        labels, size = tokens[2 + i], tokens[3 + i]
        whole = labels.isdigit() and size.isdigit() and len(labels) < 10 and len(size) < 6
        if whole and int(size) >= 64 and int(size) % 32 == 0:
            break
    else:
        return None
    losses, vals = values[:i], values[i + 2 :]
    if not 4 <= len(vals) <= 10:
        return None
    row: dict = {"step": int(e.group(1)), "epoch": float(e.group(1))}
    row["gpu_mem_gb"] = float(m.group(1)) * _GB[m.group(2).upper()]
    names = ("box_loss", "obj_loss", "cls_loss") if len(losses) == 4 else ()
    names = names or tuple(f"loss_{k}" for k in range(1, len(losses)))
    row.update(zip(names, losses[:-1], strict=True))
    row["loss"] = losses[-1]
    row["labels"], row["img_size"] = float(labels), float(size)
    names = _VAL7 if len(vals) == 7 else tuple(f"val_{k}" for k in range(1, len(vals) + 1))
    row.update(zip(names, vals, strict=True))
    return row


def sniff(head: list[str]) -> int:
    """70 for three rows or more of the layout that are half the lines or more, else 0."""
    rows = sum(1 for t in head if _row(t) is not None)
    filled = sum(1 for t in head if t.strip() and not t.startswith("#"))
    return SNIFF_MAX if rows >= MIN_ROWS and rows >= 0.5 * filled else 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    texts = lines.get_column("text").to_list()
    numbers = lines.get_column("line").to_list()
    rows: list[dict] = []
    left: list[int] = []
    ignored = 0
    for n, t in zip(numbers, texts, strict=True):
        row = _row(t)
        if row is None:
            if t.strip() and not t.startswith("# "):
                left.append(n)
            else:
                ignored += 1
            continue
        row = {"line": n, **row}
        rows.append(row)
    metrics = pl.DataFrame(rows) if rows else pl.DataFrame()
    if metrics.height:
        metrics = metrics.with_columns(pl.col("step").cast(pl.Int64))
    caveats = ["YOLO results.txt: one row an epoch (its mean losses), the epoch as the step"]
    return Parsed(
        metrics=with_core(metrics),
        meta={"caveats": caveats} if rows else {},
        unrecognized=pl.Series("line", left, dtype=pl.Int64),
        ignored=ignored,
    )
