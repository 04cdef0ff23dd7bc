"""The schedule and precision settings of Megatron's start-up argument dump.

Megatron prints every argument once per launch, between ``---- arguments ----`` and
``---- end of arguments ----``::

      lr .............................................. 0.00015
      lr_warmup_iters ................................. 0
      train_iters ..................................... 1000

The settings that say where a step sits in the planned run (peak and floor LR, warm-up
and decay, planned iterations or samples, batch size ramp, precision, clipping) are kept
in the run's metadata as ``arguments``: those of the first dump, and per later dump (of
a relaunch) each value that differs from the dump before (``argument_changes``: a
relaunch with a new LR, say), and those changes become events at the first record after
the relaunch's dump: a manual ``lr_change`` for ``lr``, a ``config_change`` for the rest.
The line of a changed argument then counts as an event line; the rest of the dump stays
ignored.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from parsers.settings import changes_between, typed_value

KEYS = (
    "lr", "min_lr", "lr_decay_style", "lr_warmup_iters", "lr_warmup_fraction",
    "lr_warmup_samples", "lr_decay_iters", "lr_decay_samples", "train_iters",
    "train_samples", "global_batch_size", "micro_batch_size", "rampup_batch_size",
    "seq_length", "fp16", "bf16", "loss_scale", "initial_loss_scale", "min_loss_scale",
    "loss_scale_window", "clip_grad", "adam_beta1", "adam_beta2", "adam_eps",
    "weight_decay", "seed",
)  # fmt: skip
_LINE = r"^(?:.*?\]:?\s*)?\s*(?P<key>[a-z_0-9]+) \.{3,} (?P<value>\S.*?)\s*$"
_START = "-- arguments --"
_END = "-- end of arguments --"
_KEYS = frozenset(KEYS)
LOOSE = 2000


def read_arguments(lines: pl.DataFrame) -> dict:
    """``{"arguments": {...}, "argument_changes": [...]}`` from the argument dumps of
    ``lines`` (``line``, ``text``); empty when there is none. Without the dump's
    banners (an excerpt), the first ``LOOSE`` candidate lines are read as one dump."""
    text = lines.get_column("text")
    hit = lines.filter(text.str.contains(" ....", literal=True))
    if hit.height == 0:
        return {}
    banners = lines.filter(text.str.contains(_START, literal=True))
    ends = lines.filter(text.str.contains(_END, literal=True)).get_column("line").to_numpy()
    at = hit.get_column("line").to_numpy()
    if banners.height:
        starts = banners.get_column("line").to_numpy()
        dump = np.searchsorted(starts, at) - 1
        close = np.searchsorted(ends, at)  # the first end marker at or after each line
        first_end = np.searchsorted(ends, starts[np.maximum(dump, 0)])
        inside = (dump >= 0) & (close == first_end)
        hit, dump = hit.filter(pl.Series(inside)), dump[inside]
    else:
        hit, dump = hit.head(LOOSE), np.zeros(min(hit.height, LOOSE), dtype=np.int64)
    parts = hit.get_column("text").str.extract_groups(_LINE).struct.unnest()
    dumps: dict[int, dict] = {}
    where: dict[tuple[int, str], int] = {}  # (dump, key) -> its line
    rows = zip(dump.tolist(), hit.get_column("line"), parts["key"], parts["value"], strict=True)
    for d, line, key, value in rows:
        if key in _KEYS and key not in dumps.setdefault(d, {}):
            dumps[d][key] = typed_value(value)
            where[d, key] = int(line)
    return changes_between(dumps, where)
