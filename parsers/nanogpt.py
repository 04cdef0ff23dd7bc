"""nanoGPT's ``train.py`` stdout.

Lines read (the formats of nanoGPT's ``print`` calls)::

    iter 250: loss 1.9890, time 31.12ms, mfu 7.48%      -> a record
    step 250: train loss 1.9745, val loss 2.0732         -> a validation event
    saving checkpoint to out-shakespeare-char             -> a checkpoint_save event
    Resuming training from out-shakespeare-char           -> a launch (restart marker)
    Overriding: learning_rate = 0.06                      -> an lr_change event (manual)
    Overriding: batch_size = 32                           -> a config_change event

``loss`` is the loss of the iteration's last micro-batch (times the accumulation
steps), not a window mean; ``time`` -> ``step_time_s``; ``mfu`` is kept in percent as
``mfu_pct`` (nanoGPT prints -100.00% until it has measured five iterations: null).
The other start-up lines (``tokens per iteration will be``, ``number of parameters``,
``Overriding config with ...`` and the config file it echoes, ``compiling the
model...``) are ignored; anything else is unrecognized.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import CheckpointSave, EventBase, Restart, Source, Validation
from parsers.columns import with_core
from parsers.reader import Spec
from parsers.reader.events import read_event

NAME = "nanogpt"
DESCRIPTION = "nanoGPT train.py stdout (iter N: loss X, time Yms, mfu Z%)"
EXAMPLE = "iter 250: loss 1.9890, time 31.12ms, mfu 7.48%"
MAPS = (
    "iter->step, loss->loss, time (ms)->step_time_s, mfu (%)->mfu_pct; 'step N: train "
    "loss, val loss'->validation events; 'saving checkpoint to'->checkpoint_save; "
    "'Resuming training from'->launch"
)

_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
RECORD = re.compile(rf"^iter (\d+): loss {_NUM}, time {_NUM}ms, mfu {_NUM}%\s*$")
EVAL = re.compile(rf"^step (\d+): train loss {_NUM}, val loss {_NUM}\s*$")
SAVE = re.compile(r"^saving checkpoint to (.+?)\s*$")
RESUME = re.compile(r"^Resuming training from (.+?)\s*$")
OVERRIDE = re.compile(r"^Overriding: (\w+) = (.+)$")  # a setting given on the command line
NOISE = re.compile(
    r"^(?:tokens per iteration will be: |found vocab_size = |Initializing a new model from "
    r"scratch|Initializing from OpenAI GPT-2 weights|defaulting to vocab_size of GPT-2|"
    r"number of parameters: |num (?:non-)?decayed parameter tensors: |using fused AdamW: |"
    r"compiling the model\.\.\.|Overriding config with |forcing vocab_size=|"
    r"overriding dropout rate to |loading weights from pretrained gpt: |# |wandb: |"
    r"WARNING: using slow attention)"
)
CONFIG_HEAD = "Overriding config with "


SNIFF_MAX = 90  # the highest score sniff gives


# the tolerant reader behind the layout reader (parsers.reader.fallback)
TOLERANT = Spec()


def sniff(head: list[str]) -> int:
    """90 with an ``iter N: loss`` line, 80 with only ``step N: train loss`` lines."""
    if any(RECORD.match(h.strip()) for h in head):
        return 90
    return 80 if any(EVAL.match(h.strip()) for h in head) else 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    text = pl.col("text").str.strip_chars()
    kinds = lines.with_columns(text.alias("s")).with_columns(
        pl.col("s").str.contains(RECORD.pattern).alias("rec"),
        pl.col("s").str.contains(EVAL.pattern).alias("ev"),
        pl.col("s").str.contains(SAVE.pattern).alias("save"),
        pl.col("s").str.contains(RESUME.pattern).alias("resume"),
        pl.col("s").str.contains(OVERRIDE.pattern).alias("override"),
        (pl.col("s") == "").alias("blank"),
        pl.col("s").str.contains(NOISE.pattern).alias("noise"),
    )
    comment = pl.col("s").str.starts_with("# ")
    known = pl.any_horizontal("rec", "ev", "save", "resume", "override", "noise") & ~comment
    # the config file echoed after "Overriding config with X:" runs up to the next line
    # nanoGPT prints itself (its own comments do not end it)
    head = pl.col("s").str.starts_with(CONFIG_HEAD)
    in_config = (
        pl.when(head).then(True).when(known & ~head).then(False).otherwise(None).forward_fill()
    )
    kinds = kinds.with_columns(in_config.fill_null(False).alias("config"))
    records = _records(kinds.filter("rec"))
    events = _events(kinds.filter(pl.any_horizontal("ev", "save", "resume", "override")), name)
    other = ~pl.any_horizontal("rec", "ev", "save", "resume", "override")
    ignored = kinds.filter(other & (pl.col("blank") | pl.col("noise") | pl.col("config")))
    unrec = kinds.filter(other & ~pl.col("blank") & ~pl.col("noise") & ~pl.col("config"))
    return Parsed(
        metrics=with_core(records),
        events=events,
        unrecognized=unrec.get_column("line"),
        ignored=ignored.height,
    )


def _records(rows: pl.DataFrame) -> pl.DataFrame:
    parts = pl.col("s").str.extract_groups(RECORD.pattern)
    out = rows.select("line", parts.alias("g")).unnest("g")
    mfu = pl.col("4").cast(pl.Float64, strict=False)
    return out.select(
        "line",
        pl.col("1").cast(pl.Int64, strict=False).alias("step"),
        pl.col("2").cast(pl.Float64, strict=False).alias("loss"),
        (pl.col("3").cast(pl.Float64, strict=False) / 1000).alias("step_time_s"),
        pl.when(mfu == -100.0).then(None).otherwise(mfu).alias("mfu_pct"),
    )


def _events(rows: pl.DataFrame, name: str) -> list[EventBase]:
    out: list[EventBase] = []
    last_eval: int | None = None
    for line, s in rows.select("line", "s").iter_rows():
        src = Source(file=name, line=line)
        if m := EVAL.match(s):
            # (a step beyond 64 bits, a damaged line, names no step: as in the records)
            last_eval = int(m.group(1)) if len(m.group(1)) <= 18 else None
            values = {"loss": float(m.group(3)), "train_loss": float(m.group(2))}
            out.append(Validation(step=last_eval, split="val", values=values, source=src, text=s))
        elif m := SAVE.match(s):
            out.append(CheckpointSave(step=last_eval, path=m.group(1), source=src, text=s))
        elif m := RESUME.match(s):
            out.append(Restart(source=src, text=s))
        elif OVERRIDE.match(s) and (ev := read_event(s, line, name)) is not None:
            out.append(ev)  # lr_change (learning_rate, lr) or config_change
    return out
