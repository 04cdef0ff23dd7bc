"""Megatron-family stdout: Megatron-LM (2020 to today), Megatron-DeepSpeed, GPT-NeoX.

A training record is one ``|``-separated line::

     iteration      100/   10000 | consumed samples: 51200 | elapsed time per
     iteration (ms): 1234.5 | learning rate: 6.000E-05 | global batch size: 512 |
     lm loss: 2.345678E+00 | loss scale: 65536.0 | grad norm: 1.234 | ...

possibly behind rank/launcher prefixes and a time stamp, hard-wrapped over several
lines, printed by many ranks, and mixed with start-up output, timers, memory reports,
NCCL and DeepSpeed messages and tracebacks. Records are read with vectorized string
operations; the few event lines (launches, crashes, checkpoint saves, validation,
overflow skips) one by one.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Nonfinite, Source
from parsers.megatron.arguments import read_arguments
from parsers.megatron.events import build_events, read_items
from parsers.megatron.lines import (
    EVENT,
    IGNORED,
    OTHER,
    PREFIX,
    PREFIX_RE,
    RECORD,
    RECORD_START,
    classify,
    resolve_other,
)
from parsers.megatron.patterns import event_patterns
from parsers.megatron.records import (
    duplicates,
    missing_loss,
    pipe_records,
    read_records,
    record_lines,
)
from parsers.megatron.scale import scale_fall_events
from parsers.reader import Spec
from parsers.settings import change_events

NAME = "megatron"
DESCRIPTION = "Megatron-LM, Megatron-DeepSpeed and GPT-NeoX training stdout"
EXAMPLE = (
    " iteration     1200/  500000 | consumed samples:       614400 | elapsed time per "
    "iteration (ms): 1523.4 | learning rate: 5.998E-05 | global batch size:   512 | "
    "lm loss: 2.715301E+00 | loss scale: 65536.0 | grad norm: 0.284 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 |"
)
MAPS = (
    "iteration->step, lm loss/lm_loss->loss, learning rate->lr, grad norm, loss scale, "
    "number of skipped/nan iterations->skipped/nan_count, consumed samples/tokens->"
    "samples/tokens, global batch size->batch_size, elapsed time per iteration (ms|s)->"
    "step_time_s, params norm->param_norm; other keys in snake_case (tflops, num_zeros, "
    "<name> loss-><name>_loss, ...)"
)

TEXT_MAX = 300
_TAIL = 64  # records read at a time from the end for the planned total
_DROP = ("nlines", "_cut", "_loss_absent", "_unread", "text")
_RECORD_RE = re.compile(PREFIX + RECORD_START)
_BANNERS_RE = re.compile(
    r"using world size: \d+|> initializing (?:torch distributed|tensor model parallel)"
    r"|Megatron|megatron/|pretrain_gpt\.py|\[default\d+\]:|DeepSpeed|deepspeed|NeoX"
)


SNIFF_MAX = 90  # the highest score sniff gives


# the tolerant reader behind the layout reader (parsers.reader.fallback)
TOLERANT = Spec()


def sniff(head: list[str]) -> int:
    """90 for a training record, 30 for start-up banners only, 5 for a log that only
    shows Megatron/DeepSpeed traces (a crash excerpt), else 0."""
    if any(_RECORD_RE.search(line) for line in head):
        return 90
    if any(line.lstrip().startswith(("using world size:", "> initializing")) for line in head):
        return 30
    if any(_BANNERS_RE.search(line) for line in head):
        return 5
    return 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    """Read a Megatron-family log (``lines``: ``line``, ``text``) into records and events."""
    anchored, anywhere = event_patterns()
    lines = lines.select("line", "text")
    text = lines.get_column("text")
    codes = resolve_other(text, classify(text, anchored, anywhere))
    starts = record_lines(lines, codes)
    rec_lines = starts.get_column("line").to_numpy()
    ev = lines[np.flatnonzero(codes == EVENT)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        # the few event lines are read one by one while the records are read
        pending = pool.submit(read_items, ev, rec_lines)
        recs = read_records(starts)
        items, unread = pending.result()
    pipe = pipe_records(lines, np.flatnonzero(codes == IGNORED), recs.get_column("step"))
    if pipe.height:
        # (steps no record gives, read from the pipeline engine's lines: records now)
        recs = pl.concat(
            [recs, pipe.select(c for c in pipe.columns if c in recs.columns)],
            how="diagonal_relaxed",
        ).sort("line")
        at = np.searchsorted(lines.get_column("line").to_numpy(), pipe.get_column("line"))
        codes[at] = RECORD
        rec_lines = recs.get_column("line").to_numpy()
        items = [replace(it, rc=int(np.searchsorted(rec_lines, it.line))) for it in items]
    rec_steps = recs.get_column("step").fill_null(-1).to_numpy()
    got = build_events(items, rec_lines, rec_steps, name)
    launch_before = pl.Series(np.searchsorted(np.array(got.launch_lines, np.int64), rec_lines))
    dup = duplicates(recs, launch_before)
    n_dup = int(dup.sum())
    kept = recs.filter(~dup) if n_dup else recs
    events = got.events + _missing_loss_events(kept, name)
    events += scale_fall_events(kept, events, name)

    unrecognized = pl.concat(
        [
            lines[np.flatnonzero(codes == OTHER)].get_column("line"),
            pl.Series("line", unread, dtype=pl.Int64),
        ]
    ).sort()
    dup_lines = int(recs.filter(dup).get_column("nlines").sum() or 0) if n_dup else 0
    counts = {
        "record": int(kept.get_column("nlines").sum() or 0),
        "event": ev.height - len(unread) - len(got.dropped),
        "ignored": int((codes == IGNORED).sum()) + dup_lines + len(got.dropped),
        "unrecognized": unrecognized.len(),
    }
    args = read_arguments(lines[np.flatnonzero(codes == IGNORED)])
    meta = _meta(kept, counts, n_dup) | args
    if args.get("argument_changes"):
        steps = kept.get_column("step").fill_null(-1).to_numpy()
        lines_kept = kept.get_column("line").to_numpy()
        changed = change_events(
            args["argument_changes"], lines_kept, steps, name, "start-up arguments of a relaunch"
        )
        events += changed
        cited = len({e.source.line for e in changed if e.source is not None})
        counts["ignored"] -= cited  # those lines are event lines now
        counts["event"] += cited
    if pipe.height:
        meta.setdefault("caveats", []).append(
            f"{pipe.height} step(s) read from DeepSpeed's pipeline-engine lines "
            "('steps: N loss: X'), which no framework record gives: their loss is the "
            "step's own, not a mean over the log interval"
        )
    return Parsed(
        metrics=kept.drop(_DROP),
        events=events,
        meta=meta,
        unrecognized=unrecognized.alias("line"),
        ignored=counts["ignored"],
    )


def _missing_loss_events(recs: pl.DataFrame, name: str) -> list[EventBase]:
    """A record without its loss field (Megatron leaves out a NaN loss, and the loss of
    an interval whose iterations were all skipped) gives a ``nonfinite`` event."""
    hit = recs.filter(missing_loss(recs)).select("step", "line", "time", "text")
    return [
        Nonfinite(
            step=step,
            metric="loss",
            value="missing",
            time=time,
            source=Source(file=name, line=line),
            text=_body(text),
        )
        for step, line, time, text in hit.iter_rows()
    ]


def _train_iters(texts: pl.Series) -> int | None:
    """The planned number of iterations (``iteration N/ M``) of the last record that
    shows it (every record does; only the last one is read)."""
    for start in range(texts.len(), 0, -_TAIL):
        for text in reversed(texts.slice(max(0, start - _TAIL), min(_TAIL, start)).to_list()):
            m = _RECORD_RE.match(text)
            if m is not None:
                total = m.group("total")  # (beyond 64 bits, a damaged line: no plan)
                return int(total) if len(total) <= 18 else None
    return None


def _body(text: str) -> str:
    m = PREFIX_RE.match(text)
    return (text[m.end() :] if m else text).strip()[:TEXT_MAX]


def _meta(recs: pl.DataFrame, counts: dict[str, int], n_dup: int) -> dict:
    meta: dict = {"line_counts": counts}
    total = _train_iters(recs.get_column("text"))
    if total is not None:
        meta["train_iters"] = total
    cut = int(recs.get_column("_cut").sum())
    caveats = []
    if cut:
        caveats.append(f"{cut} record(s) cut mid-line: only their complete fields were read")
    unread = recs.filter(pl.col("_unread") > 0)
    if unread.height:
        n, first = int(unread.get_column("_unread").sum()), int(unread.get_column("line")[0])
        caveats.append(f"{n} value(s) unreadable, left empty; first at line {first}")
    if n_dup:
        meta["duplicate_records"] = n_dup
    if caveats:
        meta["caveats"] = caveats
    return meta
