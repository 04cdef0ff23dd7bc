"""Line classes shared by the metaseq and fairseq parsers (everything but the records).

metaseq and fairseq log through Python's ``logging`` as
``<date> <time> | LEVEL | module | message`` (older fairseq printed ``| message``),
possibly behind a launcher prefix (``slurm_procid 0 : ``, ``0: ``). A line that is not a
training record is, in this order:

* ignored: blank, or a ``#`` comment added by whoever collected the log;
* an event: see ``parsers.metaseq.events`` (overflow notes, checkpoint loads and saves,
  LR scaling, skipped batches, crash evidence);
* ignored as framework noise: any other line in the logging layout, NCCL ``INFO``
  chatter, the lines between chained tracebacks, and the indented continuation lines
  of a multi-line message (a model printout, a traceback's frames) that follow such a
  line or an event;
* unrecognized: everything else (listed by line number, never dropped silently).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from parsers.columns import python_time
from parsers.metaseq import events as ev
from parsers.metaseq.parts import in_parts

_STAMP = r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?"
TIMESTAMP = f"({_STAMP})"
_SECONDS = "%Y-%m-%d %H:%M:%S"
_PART = 20_000  # lines a regex test reads in one thread, at least
LOGGER = TIMESTAMP + r" \| [A-Z]+ \| "
HYDRA_LOGGER = r"\[" + TIMESTAMP + r"\]\[[\w.]+\]\[[A-Z]+\] - "  # fairseq-hydra-train
_QUIET = r"\d \| (?:INFO|DEBUG) \| |\d\]\[[\w.]+\]\[(?:INFO|DEBUG)\] - |NCCL INFO"
_NOISE = "|".join(
    [
        LOGGER,
        HYDRA_LOGGER,
        ev.PREFIX + r"\s*\| ",  # fairseq before 0.10 printed its messages behind "| "
        r"NCCL INFO",
        ev.PREFIX + r"During handling of the above exception",
        ev.PREFIX + r"The above exception was the direct cause",
        ev.PREFIX + r"Namespace\(",  # fairseq before 0.10 printed its arguments so
        ev.PREFIX + r"[A-Z]\w*\($",  # a model printout begins with its class name
    ]
)
_CONTINUATION = ev.PREFIX + r"(?:\s+\S|[)\]}])"

BLANK, COMMENT, EVENT, NOISE, CONT, UNKNOWN, RECORD = range(7)


def timestamps(text: pl.Expr | pl.Series) -> pl.Expr | pl.Series:
    """The logging timestamp of each line (UTC: metaseq logs in UTC), or null."""
    return _parse(text.str.extract(_STAMP, 0)).alias("time")


def _parse(stamp: pl.Expr | pl.Series) -> pl.Expr | pl.Series:
    ts = stamp.str.replace("T", " ").str.replace(",", ".")
    t = ts.str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_zone="UTC", time_unit="us", strict=False, cache=False
    )
    # a damaged stamp (year 0000) is no time: nothing downstream could hold it
    return (
        pl.when(t.dt.year().is_between(1, 9999)).then(t)
        if isinstance(t, pl.Expr)
        else (pl.select(pl.when(t.dt.year().is_between(1, 9999)).then(t)).to_series().alias(t.name))
    )


def read_times(text: pl.Series) -> pl.Series:
    """:func:`timestamps` of many lines, faster: the usual whole-second stamp that opens
    the line and is followed by a space is read off the first 20 characters with a
    fixed format (no search); only the others (a prefix, ``T``, fractions) are
    searched for and read with the general format."""
    head = pl.col("text").str.slice(0, len("2000-01-01 00:00:00 "))
    # (stamps seldom repeat: polars' cache of converted values would only cost)
    time = head.str.to_datetime(
        _SECONDS + " ", time_zone="UTC", time_unit="us", strict=False, cache=False
    )
    other = pl.col("time").is_null().alias("other")
    got = in_parts(
        text.alias("text").to_frame(),
        lambda lf: lf.select(time.alias("time")).with_columns(other),
    )
    times, other_rows = got.get_column("time"), got.get_column("other")
    if other_rows.any():
        times = times.scatter(other_rows.arg_true(), timestamps(text.filter(other_rows)))
    # (the fast path's stamps as well: a damaged year is no time)
    return times.to_frame("time").select(python_time()).to_series()


def classify(text: pl.Series) -> np.ndarray:
    """The class (BLANK ... UNKNOWN) of each line that is not a record. Each test runs
    only on the lines no earlier one decided (most lines are noise)."""
    code = np.full(text.len(), UNKNOWN, dtype=np.int8)
    stripped = text.str.strip_chars()
    code[stripped.str.starts_with("#").fill_null(False).to_numpy()] = COMMENT
    code[(stripped.str.len_bytes() == 0).fill_null(False).to_numpy()] = BLANK
    left = np.flatnonzero(code == UNKNOWN)
    left = _mark(text, left, ev.EVENT_ANY, code, EVENT)
    # crash evidence, but never on a plain logging or NCCL INFO line
    loud = left[~_matches(text, left, _QUIET)]
    code[loud[_matches(text, loud, ev.CRASH_ANY)]] = EVENT
    left = left[code[left] == UNKNOWN]
    left = _mark(text, left, _NOISE, code, NOISE)
    _mark(text, left, _CONTINUATION, code, CONT)
    return code


def _matches(text: pl.Series, rows: np.ndarray, pattern: str) -> np.ndarray:
    if not rows.size:
        return np.zeros(0, dtype=bool)
    test = pl.col("text").str.contains(pattern).fill_null(False)
    got = in_parts(text.gather(rows).alias("text").to_frame(), lambda lf: lf.select(test), _PART)
    return got.to_series().to_numpy()


def _mark(
    text: pl.Series, rows: np.ndarray, pattern: str, code: np.ndarray, cls: int
) -> np.ndarray:
    """Give class ``cls`` to the ``rows`` matching ``pattern``; the others are left."""
    hit = _matches(text, rows, pattern)
    code[rows[hit]] = cls
    return rows[~hit]


def settle_continuations(code: np.ndarray) -> np.ndarray:
    """Continuation lines take the class of the block they continue: ignored after
    noise or an event, unrecognized after a record or an unrecognized line.

    ``code`` covers all lines of the file, records marked ``RECORD``."""
    cont = code == CONT
    if not cont.any():
        return code
    head = np.where((code != CONT) & (code != BLANK), np.arange(code.size), -1)
    head = np.maximum.accumulate(head) if head.size else head
    starts = np.where(head >= 0, code[np.maximum(head, 0)], UNKNOWN)
    quiet = (starts == NOISE) | (starts == EVENT)
    out = code.copy()
    out[cont & quiet] = NOISE
    out[cont & ~quiet] = UNKNOWN
    return out
