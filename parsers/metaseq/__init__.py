"""metaseq and fairseq logs with JSON progress records (``--log-format json``).

A training record is ``... | train_inner | {json}``, every value a string::

    2022-11-11 16:04:15 | INFO | train_inner | {"epoch": 1, "loss": "12.291", ...}

possibly behind a launcher prefix (``slurm_procid 0 : ``). The loss is in bits and is
stored in nats (``meta["units"]`` says so); ``ppl`` stays as logged. ``valid`` records
become ``validation`` events. The end-of-epoch ``train`` summary repeats what the
``train_inner`` records hold, so it is counted as ignored, as is a record printed twice
on adjacent lines (same payload). Payloads cut short or corrupted are unrecognized lines, unless
they were only hard-wrapped or glued to another record (``parsers.metaseq.repair``).
Other lines: see ``parsers.metaseq.lines`` and ``parsers.metaseq.events``.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers.metaseq import json as mj
from parsers.metaseq.assemble import Found, assemble
from parsers.metaseq.columns import MAPS as _MAPS
from parsers.metaseq.columns import base_caveats, to_metrics, values
from parsers.metaseq.lines import classify
from parsers.metaseq.repair import repair
from parsers.reader import Spec
from parsers.reader.fallback import bits_to_nats

NAME = "metaseq"
DESCRIPTION = "metaseq / fairseq logs with JSON train_inner records (loss in bits)"
EXAMPLE = (
    '2022-11-11 16:04:15 | INFO | train_inner | {"epoch": 1, "loss": "12.291", '
    '"num_updates": "85", "lr": "4.45726e-06", "gnorm": "4.617", ...}'
)
MAPS = _MAPS

_RECORD = re.compile(r"\| train_inner \| \{|\]\[train_inner\]\[INFO\] - \{")
_BARE = re.compile(r'^\s*\{"epoch": \d+, .*"(?:\w+_)?num_updates": "')
_FRAMEWORK = re.compile(r"\d \| [A-Z]+ \| (?:metaseq|fairseq)")


SNIFF_MAX = 90  # the highest score sniff gives


# the tolerant reader behind the layout reader (parsers.reader.fallback); a record cut
# before its num_updates has no step (the position in the epoch is not one)
TOLERANT = Spec(aliases={"num_updates": "step"}, convert=bits_to_nats, epoch_steps=False)


def sniff(head: list[str]) -> int:
    """90 with a ``train_inner`` JSON record in the head, 70 with bare fairseq JSON
    records, 40 with only metaseq logging lines, 25 with only fairseq logging lines."""
    if any(_RECORD.search(h) for h in head):
        return 90
    if any(_BARE.search(h) for h in head):
        return 70
    modules = " ".join(m.group(0) for h in head if (m := _FRAMEWORK.search(h)))
    if "metaseq" in modules:
        return 40
    return 25 if "fairseq" in modules else 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    inner, other = mj.find(lines)
    # the same record on two adjacent lines (a second rank or logger) counts once
    payload, line = inner.get_column("payload"), inner.get_column("line")
    again = ((payload == payload.shift(1)) & (line == line.shift(1) + 1)).fill_null(False)
    repeats = inner.filter(again).get_column("line").to_numpy()
    inner = inner.filter(~again) if repeats.size else inner
    with ThreadPoolExecutor(max_workers=1) as pool:
        # the other lines are classified while the records are decoded
        early = pool.submit(_classify_others, lines, inner, other)
        raw, bad = mj.decode_records(inner)
        classes = early.result()
    wrap_lines = np.zeros(0, dtype=np.int64)
    if bad.size:
        raw, bad, wrap_lines = _repair(raw, inner, bad, lines, other)
    metrics = to_metrics(raw)
    tag = pl.col("tag")
    valid, bad_valid = mj.decode_objects(other.filter(mj.is_validation(tag)))
    summary, bad_summary = mj.decode_objects(other.filter(tag == "train"))
    events = [_validation(v, name) for v in valid]
    return assemble(
        lines,
        name,
        Found(
            metrics=metrics,
            events=events,
            event_lines=np.array([v["line"] for v in valid], dtype=np.int64),
            ignored_lines=np.concatenate(
                [np.array([s["line"] for s in summary], dtype=np.int64), repeats]
            ),
            bad_lines=np.concatenate([bad, bad_valid, bad_summary]).astype(np.int64),
            wrap_lines=wrap_lines,
            caveats=_caveats(metrics, wrap_lines),
        ),
        classes,
    )


def _classify_others(lines: pl.DataFrame, inner: pl.DataFrame, other: pl.DataFrame) -> np.ndarray:
    """The class of each line that is neither a record nor a tagged JSON line (-1 for
    those), as ``assemble`` would find it."""
    code = np.full(lines.height, -1, dtype=np.int8)
    taken = np.zeros(lines.height, dtype=bool)
    taken[inner.get_column("line").to_numpy() - 1] = True
    taken[other.get_column("line").to_numpy() - 1] = True
    rest = np.flatnonzero(~taken)
    code[rest] = classify(lines.get_column("text").gather(rest))
    return code


def _repair(
    raw: pl.DataFrame,
    inner: pl.DataFrame,
    bad: np.ndarray,
    lines: pl.DataFrame,
    other: pl.DataFrame,
) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """Mend wrapped and glued records (see ``parsers.metaseq.repair``)."""
    taken = np.zeros(lines.height, dtype=bool)
    taken[inner.get_column("line").to_numpy() - 1] = True
    taken[other.get_column("line").to_numpy() - 1] = True
    broken = inner.filter(pl.col("line").is_in(bad.tolist()))
    broken = broken.with_columns(lines.get_column("text")[broken.get_column("line") - 1])
    rows, used, still = repair(broken, lines, taken)
    if rows:
        types = {"line": pl.Int64, "time": pl.Datetime("us", "UTC")}
        extra = pl.DataFrame(rows, schema_overrides=types, infer_schema_length=None)
        extra = extra.with_columns(
            pl.exclude("line", "time").cast(pl.String).cast(pl.Float64, strict=False)
        )
        raw = pl.concat([raw, extra], how="diagonal_relaxed").sort("line", maintain_order=True)
    return raw, np.array(still, dtype=np.int64), np.array(used, dtype=np.int64)


def _caveats(metrics: pl.DataFrame, wrap_lines: np.ndarray) -> list[str]:
    out = base_caveats(metrics)
    if wrap_lines.size:
        out.append(f"{wrap_lines.size} line(s) continued a hard-wrapped record: joined to it")
    lines = metrics.get_column("line")
    if lines.len() != lines.n_unique():
        glued = lines.len() - lines.n_unique()
        out.append(f"{glued} record(s) glued to another on one line: read apart")
    return out


def _validation(v: dict, name: str) -> EventBase:
    step, vals = values(v["obj"], v["tag"])
    return Validation(
        step=step,
        time=v["time"],
        split=v["tag"],
        values=vals,
        source=Source(file=name, line=v["line"]),
        text=v["text"].strip(),
    )
