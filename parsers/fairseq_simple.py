"""fairseq's ``simple`` log format (the default when not writing to a terminal).

A training record is one line of ``key=value`` pairs after the epoch and the in-epoch
batch counter, behind the logging layout or (before fairseq 0.10) a ``| ``::

    2020-07-17 04:08:14 | INFO | train_inner | epoch 001:    100 / 2952087 loss=16.348, ...
    | epoch 001:    100 / 2952087 loss=16.348, nll_loss=..., num_updates=100, ...

The step is ``num_updates`` (the in-epoch counter restarts every epoch and counts
batches, not updates); only in a file without any ``num_updates`` does the counter
stand in. A line cut short before its ``num_updates`` has no readable step and is
unrecognized. The loss is in bits and stored in nats, as for the JSON format.
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
    if "num_updates" in raw.columns and raw.get_column("num_updates").is_not_null().any():
        stepless = pl.col("num_updates").is_null()
        bad = np.concatenate([bad, raw.filter(stepless).get_column("line").to_numpy()])
        raw = raw.filter(~stepless)
    else:
        raw = raw.with_columns(pl.col("counter").cast(pl.String).alias("num_updates"))
    metrics = to_metrics(raw.drop("counter"))
    metrics, caveats = _with_summaries(metrics, ms.find_summaries(lines))
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
