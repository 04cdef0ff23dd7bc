"""The Hugging Face ``Trainer``'s stdout: the dicts it prints every ``logging_steps``::

    {'loss': 2.3115, 'grad_norm': 0.77, 'learning_rate': 4.9e-05, 'epoch': 0.02}

also with typographic quotes (as pasted into issues), string values, tqdm bars and
carriage returns around them, and DeepSpeed's overflow messages glued on. No step is
printed: records are numbered in order, times ``logging_steps`` when the output states
it (a caveat says so). ``eval_*`` dicts are validation events, the closing
``train_runtime`` dict is a summary.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "hf-trainer-log"
DESCRIPTION = "Hugging Face Trainer stdout ({'loss': ..., 'learning_rate': ..., 'epoch': ...})"
EXAMPLE = "{'loss': 2.3115, 'grad_norm': 0.7712, 'learning_rate': 4.9e-05, 'epoch': 0.02}"
MAPS = (
    "loss->loss, learning_rate->lr, grad_norm->grad_norm, epoch kept; records"
    " numbered (x logging_steps); eval_* dicts->validation"
)
SNIFF_MAX = 80
MARK = re.compile(
    "\\{\\s*['\\u2018\\u2019\\\"](?:loss|eval_loss|train_runtime|learning_rate)['\\u2018\\u2019\\\"]\\s*:"
)
# the Trainer's banner (other trainers print it too): a log that ends before its first
# dict (a crash at step 0) is the Trainer's where nothing else reads it
BANNER = re.compile(r"\*{5} Running training \*{5}")
BANNER_SCORE = 15
SPEC = Spec()


BAR = r"(\d+)/\d+ \["  # a tqdm bar's position: ``380/2724 [14:02:33<...]``
NEAR = 3  # lines between a record and the bar that gives its step, at most

_sniff, _read = reader_format(MARK, SPEC, SNIFF_MAX)


def sniff(head: list[str]) -> int:
    """80 with a dict of the Trainer's and a record, 70 with the dict alone, 15 with its
    banner alone."""
    score = _sniff(head)
    return score or (BANNER_SCORE if any(BANNER.search(h) for h in head) else 0)


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    parsed = _read(lines, name)
    if parsed.meta.get("steps_numbered") and parsed.metrics.height:
        _bar_steps(parsed, lines)
    _counted_before(parsed)
    return parsed


def _counted_before(parsed: Parsed) -> None:
    """Records numbered by a bar's position (``1/13000 [...]{'loss': ...}``) where the
    first records come before any position, as many as the first position counts (a
    loop wrapped in tqdm shows the iterations done before the one that logs): each
    record is one step after the position before it, so the run counts from 1."""
    m = parsed.metrics
    if "step" not in m.columns or m.height < 2:
        return
    step = m.get_column("step")
    lead = int(step.is_not_null().arg_max() or 0)  # records before the first position
    rest = step.slice(lead)
    if lead == 0 or rest.null_count() or int(rest[0]) != lead:
        return
    if rest.len() > 1 and not (rest.diff().drop_nulls() == 1).all():
        return
    parsed.metrics = m.with_columns(pl.int_range(1, m.height + 1, dtype=pl.Int64).alias("step"))
    parsed.meta.setdefault("caveats", []).append(
        f"the first {lead} record(s) come before any progress-bar position: each record "
        "is taken as the step after the position drawn before it (the bar counts the "
        "iterations done)"
    )


def _bar_steps(parsed: Parsed, lines: pl.DataFrame) -> None:
    """Records printed beside a progress bar take its position as their step: the
    last bar drawn before the record, else the first one after it. A record before
    the first bar whose next bar is also the next record's (an excerpt that starts at
    a log) is one logging interval before it (the interval the bars show)."""
    bars = lines.select(
        "line", pl.col("text").str.extract_all(BAR).list.last().str.extract(r"(\d+)", 1)
    ).filter(pl.col("text").is_not_null())
    if bars.height == 0:
        return
    bars = bars.select("line", pl.col("text").cast(pl.Int64, strict=False).alias("bar"))
    rec = parsed.metrics.select("line").with_row_index("i")
    before = rec.join_asof(bars, on="line", strategy="backward", tolerance=NEAR)
    after = rec.join_asof(bars, on="line", strategy="forward", tolerance=NEAR)
    shown, next_bar = before.get_column("bar"), after.get_column("bar")
    gaps = shown.drop_nulls().diff().drop_nulls()
    every = int(gaps.median() or 0) if gaps.len() else 0
    first_bar = int(bars.get_column("line").min() or 0)
    shared = (
        shown.is_null()
        & (rec.get_column("line") < first_bar)
        & (next_bar == shown.shift(-1)).fill_null(False)
    )
    if every > 0 and shared.any():
        next_bar = pl.select(pl.when(shared).then(next_bar - every).otherwise(next_bar)).to_series()
    step = shown.fill_null(next_bar)
    if step.null_count() or not step.is_sorted():
        return
    parsed.metrics = parsed.metrics.with_columns(step.alias("step"))
    parsed.meta["caveats"] = [
        c for c in parsed.meta.get("caveats", []) if not c.startswith("no step printed")
    ] + ["no step printed: each record's step is the position of the progress bar beside it"]
    parsed.meta["steps_numbered"] = False
