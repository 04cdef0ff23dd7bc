"""torchtitan stdout (``torchtitan/components/metrics.py`` and the trainer's messages).

A record, behind the logger prefix and colour codes (ANSI escapes are stripped)::

    [titan] 2025-03-04 10:15:42,123 - root - INFO - step: 10  loss:  7.1234  grad_norm:
      1.2345  memory: 12.34GiB(15.67%)  tps: 1,234  tflops: 56.78  mfu: 12.34%

(one line; older versions print no ``grad_norm``, newer ones ``mfu: N/A``). Mapped:
``step``, ``loss``, ``grad_norm``, ``memory``->``memory_gib`` and ``memory_pct``,
``tps`` (tokens per second per device), ``tflops``, ``mfu``->``mfu_pct``; the prefix's
time -> ``time`` (written without a zone: read as UTC, a caveat says so). Events:
``validate step: N  loss: ...`` -> validation; ``Saving ... checkpoint`` ->
checkpoint_save (with the time of the matching ``Finished saving``); ``Training starts
at step N`` -> a launch resuming at N - 1. A ``[rank0]:`` prefix (torchrun) is dropped.
Other lines with the ``[titan]`` prefix are framework messages (ignored); lines without
it are unrecognized, except blank lines.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import CheckpointSave, EventBase, HardwareFailure, Restart, Source, Validation
from parsers.columns import with_core
from parsers.reader import Spec
from parsers.reader.events import CRASH_CAUSES

NAME = "torchtitan"
DESCRIPTION = "torchtitan stdout (step: N  loss: X  grad_norm: ...  tps: ...  mfu: ...%)"
EXAMPLE = (
    "[titan] 2025-03-04 10:15:42,123 - root - INFO - step: 10  loss:  7.1234  grad_norm:  "
    "1.2345  memory: 12.34GiB(15.67%)  tps: 1,234  tflops: 56.78  mfu: 12.34%"
)
MAPS = (
    "step->step, loss->loss, grad_norm->grad_norm, memory->memory_gib/memory_pct, tps, "
    "tflops, mfu->mfu_pct, line time->time; 'validate step'->validation; 'Saving ... "
    "checkpoint'->checkpoint_save; 'Training starts at step N'->launch"
)

ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
RANK = r"^\[rank\d+\]:\s*"
PREFIX = re.compile(r"^\[titan\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?) - \S+ - [A-Z]+ - (.*)$")
_N = r"([-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|nan|inf|N/A))"
RECORD = re.compile(
    rf"^step:\s*(\d+)\s+loss:\s*{_N}(?:\s+grad_norm:\s*{_N})?\s+memory:\s*{_N}GiB\({_N}%\)"
    rf"\s+tps:\s*{_N}(?:\s+tflops:\s*{_N})?(?:\s+mfu:\s*{_N}%?)?\s*$"
)
VALIDATE = re.compile(rf"^validate step:\s*(\d+)\s+loss:\s*{_N}(.*)$")
_VALIDATE_EXTRA = {
    "memory_gib": re.compile(r"memory:\s*([\d.]+)GiB"),
    "memory_pct": re.compile(r"GiB\(([\d.]+)%\)"),
    "tps": re.compile(r"tps:\s*([\d,.]+)"),
}
SAVE = re.compile(r"^Saving (?:the checkpoint|a (?:full|model only) checkpoint)")
SAVED = re.compile(r"^Finished saving the checkpoint.*?in ([\d.]+) seconds")
START = re.compile(r"^Training starts at step (\d+)")
CRASH = {cause: re.compile(p) for cause, p in CRASH_CAUSES}  # most specific first
TZ_CAVEAT = "torchtitan: log times carry no zone: read as UTC"


SNIFF_MAX = 90  # the highest score sniff gives


# the tolerant reader behind the layout reader (parsers.reader.fallback)
TOLERANT = Spec()


def sniff(head: list[str]) -> int:
    """90 with a metrics line, 40 with only ``[titan]`` prefixed lines."""
    clean = [_clean_text(h) for h in head]
    if any(RECORD.match(c) for c in clean):
        return 90
    return 40 if any(h.lstrip().startswith(("[titan]", "[rank0]:[titan]")) for h in head) else 0


def _clean_text(s: str) -> str:
    s = re.sub(ANSI, "", s)
    s = re.sub(RANK, "", s.strip())
    m = PREFIX.match(s)
    return m.group(2).strip() if m else s


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    s = pl.col("text").str.replace_all(ANSI, "").str.strip_chars().str.replace(RANK, "")
    frame = lines.with_columns(s.alias("s"))
    pre = pl.col("s").str.extract_groups(PREFIX.pattern)
    frame = frame.with_columns(pre.alias("p")).with_columns(
        pl.col("p").struct.field("1").alias("stamp"),
        pl.coalesce(pl.col("p").struct.field("2"), pl.col("s")).str.strip_chars().alias("msg"),
    )
    msg = pl.col("msg")
    frame = frame.with_columns(
        msg.str.contains(RECORD.pattern).alias("rec"),
        (
            msg.str.contains(VALIDATE.pattern)
            | msg.str.contains(SAVE.pattern)
            | msg.str.contains(START.pattern)
            | pl.any_horizontal(msg.str.contains(p.pattern) for p in CRASH.values())
        ).alias("ev"),
    )
    records = _records(frame.filter("rec"))
    events = _events(frame.filter("ev"), name)
    _save_times(events, frame.filter(msg.str.contains(SAVED.pattern)))
    rest = frame.filter(~pl.col("rec") & ~pl.col("ev"))
    framework = pl.col("stamp").is_not_null() | (pl.col("s") == "")
    unrec = rest.filter(~framework).get_column("line")
    caveats = [TZ_CAVEAT] if records.get_column("time").is_not_null().any() else []
    return Parsed(
        metrics=with_core(records),
        events=events,
        meta={"caveats": caveats},
        unrecognized=unrec,
        ignored=rest.height - unrec.len(),
    )


def _num(col: str) -> pl.Expr:
    return pl.col(col).str.replace_all(",", "").cast(pl.Float64, strict=False)


def _time(col: str = "stamp") -> pl.Expr:
    return (
        pl.col(col)
        .str.replace(",", ".")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)
        .dt.replace_time_zone("UTC")
    )


def _records(rows: pl.DataFrame) -> pl.DataFrame:
    g = rows.select("line", "stamp", pl.col("msg").str.extract_groups(RECORD.pattern).alias("g"))
    g = g.unnest("g")
    return g.select(
        "line",
        _time().alias("time"),
        pl.col("1").cast(pl.Int64, strict=False).alias("step"),
        _num("2").alias("loss"),
        _num("3").alias("grad_norm"),
        _num("4").alias("memory_gib"),
        _num("5").alias("memory_pct"),
        _num("6").alias("tps"),
        _num("7").alias("tflops"),
        _num("8").alias("mfu_pct"),
    )


def _save_times(events: list[EventBase], done: pl.DataFrame) -> None:
    """Give each checkpoint save the duration its ``Finished saving`` line reports."""
    saves = [e for e in events if isinstance(e, CheckpointSave)]
    for line, msg in done.select("line", "msg").iter_rows():
        before = [e for e in saves if e.source and (e.source.line or 0) < line]
        if before and (m := SAVED.match(msg)):
            before[-1].save_time_s = float(m.group(1))


def _events(rows: pl.DataFrame, name: str) -> list[EventBase]:
    out: list[EventBase] = []
    times = rows.select(_time()).to_series().to_list()
    for (line, msg), t in zip(rows.select("line", "msg").iter_rows(), times, strict=True):
        src = Source(file=name, line=line)
        if m := VALIDATE.match(msg):
            values = {"loss": float(m.group(2).replace(",", ""))}
            for key, pat in _VALIDATE_EXTRA.items():
                if x := pat.search(m.group(3)):
                    values[key] = float(x.group(1).replace(",", ""))
            out.append(Validation(step=int(m.group(1)), time=t, split="validate",
                                  values=values, source=src, text=msg))  # fmt: skip
        elif SAVE.match(msg):
            out.append(CheckpointSave(time=t, source=src, text=msg))
        elif m := START.match(msg):
            out.append(Restart(resume_step=int(m.group(1)) - 1, time=t, source=src, text=msg))
        else:
            cause = next(c for c, p in CRASH.items() if p.search(msg))
            out.append(HardwareFailure(cause=cause, time=t, source=src, text=msg[:300]))
    return out
