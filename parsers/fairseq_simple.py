"""fairseq's ``simple`` log format (the default when not writing to a terminal).

A training record is one line of ``key=value`` pairs after the epoch and the in-epoch
batch counter, behind the logging layout or (before fairseq 0.10) a ``| ``::

    2020-07-17 04:08:14 | INFO | train_inner | epoch 001:    100 / 2952087 loss=16.348, ...
    | epoch 001:    100 / 2952087 loss=16.348, nll_loss=..., num_updates=100, ...

The step is ``num_updates`` (the in-epoch counter restarts every epoch and counts
batches, not updates); only in a file without any ``num_updates`` does the counter
stand in. A line cut short before its ``num_updates`` has no readable step and is
unrecognized. An update whose fp16 gradients overflowed leaves ``num_updates`` where it
was, and fairseq (2020, ``--log-interval`` dividing the count) still prints its record,
with the loss scale and the wall clocks but neither loss nor ``num_updates``::

    epoch 001:      3 / 78 loss_scale=16, train_wall=0, wall=6

``num_updates`` cannot number such a file (the attempts share counts), so its records
are numbered by update attempt, ``(epoch - 1) * M + N`` from ``epoch E: N / M`` (the
position itself without ``/ M``), ``num_updates`` kept as a column; such a record has
``skipped`` 1. A caveat says so. The loss is in bits and stored in nats, as for the JSON format.
``valid on '<subset>' subset`` lines become ``validation`` events; the end-of-epoch
summary (``epoch 001 | loss ... | num_updates N | wall ...``) is ignored (it averages
the records), unless the file has no records otherwise: then the summaries are the run's
records (with a caveat).
Other lines: see ``parsers.metaseq.lines`` and ``parsers.metaseq.events``.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import Source, Validation
from parsers.metaseq import TOLERANT as METASEQ_TOLERANT
from parsers.metaseq import simple as ms
from parsers.metaseq.assemble import Found, assemble
from parsers.metaseq.columns import MAPS as _MAPS
from parsers.metaseq.columns import base_caveats, to_metrics, values

NAME = "fairseq-simple"
DESCRIPTION = "fairseq 'simple' format: epoch 001: N / M loss=..., num_updates=..."
EXAMPLE = (
    "2020-07-17 04:08:14 | INFO | train_inner | epoch 001:    100 / 2952087 loss=16.348, "
    "ppl=83437.5, wps=8640.2, ups=4.66, wpb=1854, bsz=2, num_updates=100, lr=1e-06, ..."
)
MAPS = _MAPS + "; without num_updates, the in-epoch counter -> step"

_RECORD = re.compile(ms.RECORD)
_VALID = re.compile(ms.VALID)
_FAIRSEQ = re.compile(r"\d \| [A-Z]+ \| fairseq")


SNIFF_MAX = 90  # the highest score sniff gives


TOLERANT = METASEQ_TOLERANT  # the tolerant reader behind the layout reader, as for metaseq
# a file without any record of the layout (fairseq-py before 0.5: no colon after the
# epoch, no num_updates): the in-epoch counter stands in, as in the layout reader
TOLERANT_ALONE = replace(METASEQ_TOLERANT, counter_steps=True)


def sniff(head: list[str]) -> int:
    """90 with a simple-format record in the head, 60 with only its validation lines,
    30 with only fairseq logging lines."""
    if any(_RECORD.search(h) for h in head):
        return 90
    if any(_VALID.search(h) for h in head):
        return 60
    return 30 if any(_FAIRSEQ.search(h) for h in head) else 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    raw, bad = ms.find_records(lines)
    caveats: list[str] = []
    numbered = "num_updates" in raw.columns and raw.get_column("num_updates").is_not_null().any()
    overflowed = _overflowed(raw) if numbered else pl.lit(False)
    if numbered and raw.select(overflowed.any()).item():
        metrics, caveats = _attempt_steps(raw, lines, overflowed)
    else:
        if numbered:
            stepless = pl.col("num_updates").is_null()
            bad = np.concatenate([bad, raw.filter(stepless).get_column("line").to_numpy()])
            raw = raw.filter(~stepless)
        else:
            raw = raw.with_columns(pl.col("counter").cast(pl.String).alias("num_updates"))
        metrics = to_metrics(raw.drop("counter"))
    metrics, more = _with_summaries(metrics, ms.find_summaries(lines))
    caveats += more
    valid = ms.find_validation(lines)
    events = []
    for line, time, text, split, pairs in valid.select(
        "line", "time", "text", "split", "pairs"
    ).iter_rows():
        step, vals = values(ms.pipe_pairs(pairs), split)
        src = Source(file=name, line=line)
        events.append(
            Validation(step=step, time=time, split=split, values=vals, source=src, text=text)
        )
    return assemble(
        lines,
        name,
        Found(
            metrics=metrics,
            events=events,
            event_lines=valid.get_column("line").to_numpy(),
            bad_lines=np.sort(bad).astype(np.int64),
            caveats=base_caveats(metrics) + caveats,
        ),
    )


# ``epoch E: N / M``: the epoch and its size, for the attempt count of a record
_POSITION = re.compile(r"epoch (\d+):\s+\d+(?:\s*/\s*(\d+))?\s")


def _overflowed(raw: pl.DataFrame) -> pl.Expr:
    """Records of overflowed updates: a loss scale, and neither loss nor num_updates (a
    line cut short before them still has the ``loss`` key, if without a value)."""
    if "loss_scale" not in raw.columns:
        return pl.lit(False)
    no_loss = pl.col("loss").is_null() if "loss" in raw.columns else pl.lit(True)
    return pl.col("num_updates").is_null() & no_loss & pl.col("loss_scale").is_not_null()


def _attempt_steps(
    raw: pl.DataFrame, lines: pl.DataFrame, overflowed: pl.Expr
) -> tuple[pl.DataFrame, list[str]]:
    """Records numbered by update attempt (a file with overflowed updates' records)."""
    where = lines.filter(pl.col("line").is_in(raw.get_column("line").implode())).select(
        "line",
        pl.col("text").str.extract(_POSITION.pattern, 1).cast(pl.Int64).alias("_epoch"),
        pl.col("text").str.extract(_POSITION.pattern, 2).cast(pl.Int64).alias("_size"),
    )
    raw = raw.join(where, on="line", how="left", maintain_order="left")
    before = ((pl.col("_epoch") - 1) * pl.col("_size")).fill_null(0)
    n = raw.select(overflowed.sum()).item()
    raw = raw.with_columns(
        pl.when(overflowed).then(pl.lit("1")).otherwise(pl.lit("0")).alias("skipped"),
        pl.col("num_updates").alias("_updates"),
        (before + pl.col("counter")).cast(pl.String).alias("num_updates"),
    )
    metrics = to_metrics(raw.drop("counter", "_epoch", "_size"))
    if "_updates" in metrics.columns:
        metrics = metrics.with_columns(pl.col("_updates").cast(pl.Int64).alias("num_updates"))
        metrics = metrics.drop("_updates")
    sizes = raw.get_column("_size")
    if sizes.null_count() == 0 and sizes.n_unique() == 1:
        how = f"(epoch - 1) * {sizes[0]} + the in-epoch position"
    else:
        how = "the in-epoch position, + (epoch - 1) * the epoch's size where printed"
    return metrics, [
        f"{n} records of overflowed updates print no num_updates: every record's step is "
        f"its update attempt, {how}, not num_updates (kept as a column)"
    ]


def _with_summaries(metrics: pl.DataFrame, found: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """End-of-epoch summaries are the records of a run logged without inner records;
    beside inner records they stay ignored (an epoch's mean loss among per-update
    losses would read as a jump)."""
    if found.height == 0 or metrics.height:
        return metrics, []
    rows = [{"line": r["line"], **ms.pipe_pairs(r["pairs"])} for r in found.iter_rows(named=True)]
    raw = pl.DataFrame(rows, infer_schema_length=None).with_columns(found.get_column("time"))
    summary = to_metrics(raw.with_columns(pl.col("line").cast(pl.String)))
    summary = summary.with_columns(pl.col("line").cast(pl.Int64))
    seen = (
        metrics.get_column("step") if "step" in metrics.columns else pl.Series([], dtype=pl.Int64)
    )
    new = summary.filter(pl.col("step").is_not_null() & ~pl.col("step").is_in(seen.implode()))
    if new.height == 0:
        return metrics, []
    out = pl.concat([metrics, new], how="diagonal_relaxed").sort("line")
    return out, [f"no train_inner records: {new.height} end-of-epoch summaries read as records"]
