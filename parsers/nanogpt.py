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
Forks add fields or drop some (``iter 100: loss 3.21, ppl 24.8, time 50.2ms``, an early
``train.py`` without ``mfu``): after ``iter N: loss X`` any ``, key value`` fields are
read, through the common alias table (``lr`` -> ``lr``), others in snake_case
(``ppl``); in an evaluation line, ``train K`` and ``val K`` are ``train_K`` and ``K``.
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
from parsers.reader import Spec, aliases
from parsers.reader.events import read_event
from parsers.reader.extract import COMMENT

NAME = "nanogpt"
DESCRIPTION = "nanoGPT train.py stdout (iter N: loss X, time Yms, mfu Z%; forks' extra fields)"
EXAMPLE = "iter 250: loss 1.9890, time 31.12ms, mfu 7.48%"
MAPS = (
    "iter->step, loss->loss, time (ms)->step_time_s, mfu (%)->mfu_pct, other ', key value' "
    "fields through the alias table (ppl kept); 'step N: train loss, val loss'->validation "
    "events; 'saving checkpoint to'->checkpoint_save; 'Resuming training from'->launch"
)

_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
_KEY = r"[A-Za-z][\w/.-]*(?: [A-Za-z][\w/.-]*)*"
# one ``, key value`` field after the loss: its key, value and unit
FIELD = re.compile(rf", ({_KEY}):? {_NUM}([A-Za-z%/]*)")
_FIELDS = rf"((?:, {_KEY}:? [-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)[A-Za-z%/]*)*)"
RECORD = re.compile(rf"^iter (\d+): loss {_NUM}{_FIELDS}\s*$")
EVAL = re.compile(rf"^step (\d+): train loss {_NUM}, val loss {_NUM}{_FIELDS}\s*$")
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
        # (a blank line, or a collector's comment or elision: ``# source:``, ``...``)
        ((pl.col("s") == "") | pl.col("s").str.contains(COMMENT)).alias("blank"),
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
    core = [
        "line",
        pl.col("1").cast(pl.Int64, strict=False).alias("step"),
        pl.col("2").cast(pl.Float64, strict=False).alias("loss"),
    ]
    return out.select(*core, *_field_columns(out.get_column("3"), {"step", "loss"}))


def _field_columns(rest: pl.Series, taken: set[str]) -> list[pl.Expr]:
    """The columns of the ``, key value`` fields (``rest``: each line's fields, column
    ``3``), in the order their keys first occur: ``time`` in ms -> ``step_time_s``,
    ``mfu`` in % -> ``mfu_pct`` (-100: not measured yet), others by the alias table or
    in snake_case (``<key>_pct`` in %), a ``k``/``M`` count suffix applied."""
    firsts: dict[str, str] = {}  # key -> the unit it is first printed with
    for fields in rest.unique(maintain_order=True).head(_KEY_SAMPLE).to_list():
        for key, _, unit in FIELD.findall(fields or ""):
            firsts.setdefault(key, unit)
    out = []
    for key, unit in firsts.items():
        column = _column(key, unit, taken)
        taken.add(column)
        field = rf"(?:^|, ){re.escape(key)}:? {_NUM}([A-Za-z%/]*)"
        value = pl.col("3").str.extract(field, 1).cast(pl.Float64, strict=False)
        printed = pl.col("3").str.extract(field, 2).fill_null("")
        if column in aliases.TIME_COLUMNS:  # (a time without its unit: a line cut short)
            scale = printed.replace_strict(_TIME_SCALE, default=None, return_dtype=pl.Float64)
            value = value * scale
        elif column.endswith("_pct"):  # (a percentage without its %: cut short too)
            value = pl.when(printed == "%").then(value)
        else:
            value = value * printed.replace_strict(
                _COUNT_SCALE, default=1.0, return_dtype=pl.Float64
            )
        if key == "mfu":
            value = pl.when(value == -100.0).then(None).otherwise(value)
        if column in aliases.INT_COLUMNS:
            value = value.round(0).cast(pl.Int64, strict=False)
        out.append(value.alias(column))
    return out


_KEY_SAMPLE = 1000  # distinct field lists looked at for the keys
_TIME_SCALE = {"ms": 1e-3, "s": 1.0, "us": 1e-6}
_COUNT_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9}


def _column(key: str, unit: str, taken: set[str]) -> str:
    """The column of a field's key: the alias table's, else its own (``mfu`` in % is
    ``mfu_pct``); a key on a column taken already keeps its own name."""
    column = aliases.canonical(key) or aliases.column_of(key)
    if column not in aliases.TIME_COLUMNS and unit == "%":
        column = f"{aliases.column_of(key)}_pct"
    if column in taken:
        column = f"{aliases.column_of(key)}_field"
    return column


def _events(rows: pl.DataFrame, name: str) -> list[EventBase]:
    out: list[EventBase] = []
    last_eval: int | None = None
    for line, s in rows.select("line", "s").iter_rows():
        src = Source(file=name, line=line)
        if m := EVAL.match(s):
            # (a step beyond 64 bits, a damaged line, names no step: as in the records)
            last_eval = int(m.group(1)) if len(m.group(1)) <= 18 else None
            values = {"loss": float(m.group(3)), "train_loss": float(m.group(2))}
            values.update(_eval_values(m.group(4)))
            out.append(Validation(step=last_eval, split="val", values=values, source=src, text=s))
        elif m := SAVE.match(s):
            out.append(CheckpointSave(step=last_eval, path=m.group(1), source=src, text=s))
        elif m := RESUME.match(s):
            out.append(Restart(source=src, text=s))
        elif OVERRIDE.match(s) and (ev := read_event(s, line, name)) is not None:
            out.append(ev)  # lr_change (learning_rate, lr) or config_change
    return out


def _eval_values(fields: str) -> dict[str, float]:
    """The values of an evaluation line's other fields: ``val K`` is ``K``, ``train K``
    is ``train_K`` (``train ppl 72.6, val ppl 72.5``), others by their own names."""
    out: dict[str, float] = {}
    for key, value, _ in FIELD.findall(fields or ""):
        name = aliases.column_of(key)
        for prefix in ("val_", "valid_", "validation_", "eval_"):
            if name.startswith(prefix) and len(name) > len(prefix):
                name = name[len(prefix) :]
        out.setdefault(name, float(value))
    return out
