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

import re

import numpy as np
import polars as pl

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
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


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
            dumps[d][key] = _value(value)
            where[d, key] = int(line)
    dumps = {d: v for d, v in dumps.items() if v}
    if not dumps:
        return {}
    order = sorted(dumps)
    out: dict = {"arguments": dumps[order[0]]}
    seen = dict(dumps[order[0]])
    changes = []
    for d in order[1:]:
        for key, value in dumps[d].items():
            if key in seen and seen[key] != value:
                changes.append({"line": where[d, key], "key": key, "old": seen[key], "new": value})
            seen[key] = value
    if changes:
        out["argument_changes"] = changes
    return out


def _value(raw: str) -> str | int | float | bool | None:
    if raw in ("True", "False"):
        return raw == "True"
    if raw == "None":
        return None
    if _NUMBER.fullmatch(raw):
        number = float(raw)
        whole = number.is_integer() and not any(c in raw for c in ".eE")
        return int(raw) if whole else number
    return raw


def change_events(changes: list[dict], rec_lines: np.ndarray, rec_steps: np.ndarray, name: str):
    """A relaunch's changed arguments as events at the step of the first record after its
    dump: the LR as a manual ``lr_change``, the rest as ``config_change`` (none for a
    dump with no record after it)."""
    from logbook.schema import ConfigChange, LrChange, Source

    out = []
    for c in changes:
        if c["line"] is None:
            continue
        rc = int(np.searchsorted(rec_lines, c["line"]))
        if rc >= rec_lines.size or rec_steps[rc] < 0:
            continue
        step, src = int(rec_steps[rc]), Source(file=name, line=c["line"])
        old, new = c["old"], c["new"]
        text = f"{c['key']}: {old} -> {new} (start-up arguments of a relaunch)"
        if c["key"] == "lr" and isinstance(old, int | float) and isinstance(new, int | float):
            out.append(LrChange(step=step, old=old, new=new, manual=True, source=src, text=text))
        else:
            out.append(
                ConfigChange(
                    step=step, key=c["key"], old=_plain(old), new=_plain(new), source=src, text=text
                )  # fmt: skip
            )
    return out


def _plain(v: object) -> str | float | None:
    if v is None:
        return None
    return v if isinstance(v, int | float) and not isinstance(v, bool) else str(v)
