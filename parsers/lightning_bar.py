"""PyTorch Lightning's console output: its TQDM progress bar, one state per redraw::

    Epoch 0:  50%|█████▍     | 1007/2015 [04:03<04:03,  4.14it/s, loss=nan, v_num=0]

Read by the tolerant reader: the step is the bar's batch count, ``epoch * N + n`` from
``Epoch E: ... n/N``. That counts batches, not optimizer steps: with gradient
accumulation Lightning's ``global step`` (printed by ``ModelCheckpoint``) is smaller,
and a caveat says so where a checkpoint message shows it.

The callbacks' one-line messages are printed without a newline of their own after a
bar's last redraw (the bar cut at the terminal's width), e.g.
``..., v_num=Epoch 0, global step 51: 'val_accuracy' reached 0.02055 (best 0.02055),
saving model to '...' as top 3``: such a glued message (``ModelCheckpoint``'s ``Epoch
E, global step S: ...``, ``EarlyStopping``'s ``Metric M improved ...`` and ``Monitored
metric M did not improve ...``, the trainer's ```Trainer.fit` stopped: ...``) is no part
of the bar's record (its ``global step`` is not the bar's step, its values are not
metrics). On a line of its own it stays what the reader makes of it (a validation
result).
"""

from __future__ import annotations

import re

import polars as pl

from logbook.blocks import LineBlocks
from logbook.parsed import Parsed
from parsers.reader import Spec, read
from parsers.reader.framework import sniff_marked

NAME = "lightning-bar"
DESCRIPTION = "PyTorch Lightning console: Epoch E: P%|...| n/N [..., loss=..., v_num=...]"
EXAMPLE = "Epoch 0:  50%|█████▍     | 1007/2015 [04:03<04:03,  4.14it/s, loss=2.31, v_num=0]"
MAPS = (
    "bar position n of N in epoch E -> step E*N+n (batches), loss->loss, other postfix keys "
    "(train_loss_step, val_loss, ...) through the common alias table, else snake_case"
)
SNIFF_MAX = 50
STREAMS = True  # each line read on its own: a large file is read in blocks

MARK = re.compile(
    r"^Epoch \d+:\s+\d+%\||^(?:GPU|TPU) available: (?:True|False)"
    r"|^LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES|`Trainer\.fit` stopped"
)
# a callback's message glued onto the end of a bar (a character other than a space
# before it): cut off the record's line
_GLUED = (
    r"([^\s])(?:Epoch \d+, global step \d+: |`Trainer\.(?:fit|validate|test|predict)` "
    r"stopped: |Metric \S+ improved |Monitored metric \S+ did not improve ).*$",
    "$1",
)
SPEC = Spec(rewrite=(_GLUED,))
_GLOBAL = r"Epoch (\d+), global step (\d+): "


def sniff(head: list[str]) -> int:
    """50 with a Lightning line and a record in the head, 40 with a Lightning line alone."""
    return sniff_marked(head, MARK, SPEC, SNIFF_MAX)


def parse(lines: pl.DataFrame | LineBlocks, name: str) -> Parsed:
    parsed = read(lines, name, SPEC)
    caveat = _batches_not_global_steps(lines, parsed.metrics)
    if caveat:
        parsed.meta.setdefault("caveats", []).append(caveat)
    return parsed


def _global_steps(lines: pl.DataFrame) -> pl.DataFrame:
    """The lines of checkpoint messages and the global step each prints."""
    return lines.filter(pl.col("text").str.contains(_GLOBAL)).select(
        "line", pl.col("text").str.extract(_GLOBAL, 2).cast(pl.Int64).alias("global_step")
    )


def _batches_not_global_steps(
    lines: pl.DataFrame | LineBlocks, metrics: pl.DataFrame
) -> str | None:
    """A caveat where a checkpoint message's global step is not the step of the bar
    printed last before it (or on its line)."""
    if "step" not in metrics.columns or metrics.height == 0:
        return None
    frames = [lines] if isinstance(lines, pl.DataFrame) else lines  # blocks: one at a time
    said = pl.concat([_global_steps(f) for f in frames])
    if said.height == 0:
        return None
    bars = metrics.select("line", "step").drop_nulls().sort("line")
    pairs = said.sort("line").join_asof(bars, on="line", strategy="backward").drop_nulls()
    off = pairs.filter(pl.col("step") != pl.col("global_step"))
    if off.height == 0:
        return None
    batch, step = off.row(0, named=True)["step"], off.row(0, named=True)["global_step"]
    per = f" (about {batch / step:.3g} batches an optimizer step)" if step > 0 else ""
    return (
        f"steps are the bar's batches (epoch * N + n), not Lightning's global step: the "
        f"checkpoint message after batch {batch} says global step {step}{per}"
    )
