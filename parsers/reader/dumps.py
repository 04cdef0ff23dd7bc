"""The Hugging Face Trainer's settings as training scripts echo them at start-up
(``logger.info(f"Training/evaluation parameters {training_args}")``), one field a line
since transformers 4, on one line before::

    ... Training/evaluation parameters TrainingArguments(
    _n_gpu=1,
    ...
    learning_rate=5e-05,
    ...
    )

The lines of an echo are ignored lines; the settings that say where a step sits in the
planned run are kept under Megatron's names (``learning_rate`` -> ``lr``, ``max_steps``
-> ``train_iters``, ...) so that every reader of ``arguments`` finds them, and a later
echo (a relaunch) that changes one gives an event (see :mod:`parsers.settings`).
"""

from __future__ import annotations

import re

import polars as pl

from parsers.settings import changes_between, typed_value

OPEN = "TrainingArguments("
KEYS = {
    "learning_rate": "lr",
    "lr_scheduler_type": "lr_decay_style",
    "warmup_steps": "lr_warmup_iters",
    "warmup_ratio": "lr_warmup_fraction",
    "max_steps": "train_iters",
    "num_train_epochs": "num_train_epochs",
    "per_device_train_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "fp16": "fp16",
    "bf16": "bf16",
    "max_grad_norm": "clip_grad",
    "adam_beta1": "adam_beta1",
    "adam_beta2": "adam_beta2",
    "adam_epsilon": "adam_eps",
    "weight_decay": "weight_decay",
    "seed": "seed",
}
MAX_LINES = 400  # lines one echo may span, at most
_FIELD = re.compile(r"^\s*(\w+)=(.*?),?\s*$")  # ``learning_rate=5e-05,``
_PAIRS = re.compile(r"(\w+)=('[^']*'|\"[^\"]*\"|[^,()\s]+)")  # the one-line form


def read_dumps(df: pl.DataFrame) -> tuple[dict, list[int]]:
    """``{"arguments": ..., "argument_changes": [...]}`` from the echoes among the lines
    of ``df`` (``line``, ``body``), and the lines the echoes span."""
    body = df.get_column("body")
    opens = df.filter(body.str.contains(OPEN, literal=True))
    if opens.height == 0:
        return {}, []
    dumps: dict[int, dict] = {}
    where: dict[tuple[int, str], int] = {}
    spanned: list[int] = []
    for d, (line, text) in enumerate(opens.select("line", "body").iter_rows()):
        rest = text[text.index(OPEN) + len(OPEN) :]
        if "=" in rest:  # the whole echo on this one line
            pairs = [(line, k, v) for k, v in _PAIRS.findall(rest)]
            spanned.append(line)
        else:
            pairs, span = _fields(df, line)
            spanned += span
        got = dumps.setdefault(d, {})
        for at, key, raw in pairs:
            name = KEYS.get(key)
            if name is not None and name not in got:
                got[name] = _value(raw)
                where[d, name] = at
    return changes_between(dumps, where), spanned


def _fields(df: pl.DataFrame, line: int) -> tuple[list[tuple[int, str, str]], list[int]]:
    """The ``key=value,`` lines after the echo's first line, up to its ``)``."""
    after = df.filter(pl.col("line").is_between(line + 1, line + MAX_LINES))
    pairs, span, expect = [], [line], line + 1
    for at, text in after.select("line", "body").iter_rows():
        if at != expect:
            break  # (a line between was a record's: the echo ended without its ``)``)
        expect += 1
        if text.strip() == ")":
            span.append(at)
            break
        m = _FIELD.match(text)
        if m is None:
            break
        pairs.append((at, m.group(1), m.group(2)))
        span.append(at)
    return pairs, span


def _value(raw: str) -> str | int | float | bool | None:
    raw = raw.strip().strip("'\"")
    if raw.startswith(("SchedulerType.", "IntervalStrategy.")):
        raw = raw.split(".", 1)[1].lower()
    return typed_value(raw)
