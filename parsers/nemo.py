"""NVIDIA NeMo stdout: NeMo 1 and 2 (Lightning progress lines and ``Training epoch E,
iteration I/N | lr: ... | global_step: G | reduced_train_loss: ...``) and NeMo
Automodel (``step 4 | epoch 0 | loss 1.5514 | grad_norm 102.0 | mem: 11.66 GiB``).

``global_step`` is the step where it is printed (the iteration within the epoch is kept
as ``iteration``); ``reduced_train_loss`` -> ``loss`` (Lightning's own ``loss=`` beside it
-> ``ptl_loss``); ``train_step_timing in s`` ->
``step_time_s``; validation values on a training line stay columns (``val_loss``).
"""

from __future__ import annotations

import re

import polars as pl

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "nemo"
DESCRIPTION = "NeMo 1/2 and NeMo Automodel stdout (reduced_train_loss=, global_step=)"
EXAMPLE = (
    "Training epoch 0, iteration 8/29 | lr: 5.389e-06 | global_step: 8 | reduced_train_loss: 10.22"
)
MAPS = (
    "global_step->step (else step), reduced_train_loss->loss, lr->lr,"
    " grad_norm->grad_norm, train_step_timing in s->step_time_s,"
    " consumed_samples->samples; other keys in snake_case"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile(
    r"reduced_train_loss|train_step_timing|\[NeMo [IWE] |"
    r"nemo_automodel|^(?:INFO:root:)?step \d+ \| epoch \d+ \| loss "
)


def _reduced_loss(records: pl.DataFrame) -> pl.DataFrame:
    """NeMo's ``reduced_train_loss`` is the loss: a Lightning bar also shows
    Lightning's own running ``loss=`` (nan under Megatron-style training), kept as
    ``ptl_loss``: a NaN there says nothing of the run."""
    if "reduced_train_loss" not in records.columns:
        return records
    if "loss" not in records.columns:
        return records.rename({"reduced_train_loss": "loss"})
    # (where the reduced loss is missing, a cut record, Lightning's stands in unless NaN)
    ptl = pl.when(pl.col("loss").is_nan()).then(None).otherwise(pl.col("loss"))
    loss = pl.coalesce(pl.col("reduced_train_loss"), ptl).alias("loss")
    return records.with_columns(pl.col("loss").alias("ptl_loss"), loss).drop("reduced_train_loss")


# Lightning's bar prints a float metric with three significant digits: from 10,000 on
# ``global_step=3.1e+4`` names no step; the bar's own count is the step then.
_ROUNDED_STEP = (r"\bglobal_step=(\d(?:\.\d+)?e\+\d+)", "global_step_rounded=$1")
SPEC = Spec(convert=_reduced_loss, rewrite=(_ROUNDED_STEP,))


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
