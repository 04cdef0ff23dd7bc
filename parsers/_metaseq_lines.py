"""Line classes shared by the metaseq and fairseq parsers (everything but the records).

metaseq and fairseq log through Python's ``logging`` as
``<date> <time> | LEVEL | module | message`` (older fairseq printed ``| message``),
possibly behind a launcher prefix (``slurm_procid 0 : ``, ``0: ``). A line that is not a
training record is, in this order:

* ignored: blank, or a ``#`` comment added by whoever collected the log;
* an event: see ``parsers._metaseq_events`` (overflow notes, checkpoint loads and saves,
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

from parsers import _metaseq_events as ev

TIMESTAMP = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
LOGGER = TIMESTAMP + r" \| [A-Z]+ \| "
_QUIET = r"\d \| (?:INFO|DEBUG) \| |NCCL INFO"  # never crash evidence
_NOISE = "|".join(
    [
        LOGGER,
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
    ts = text.str.extract(TIMESTAMP, 1).str.replace("T", " ").str.replace(",", ".")
    return ts.str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_zone="UTC", time_unit="us", strict=False
    ).alias("time")


def classify(text: pl.Series) -> np.ndarray:
    """The class (BLANK ... UNKNOWN) of each line that is not a record."""
    stripped = text.str.strip_chars()
    quiet = text.str.contains(_QUIET)
    event = text.str.contains(ev.EVENT_ANY) | (text.str.contains(ev.CRASH_ANY) & ~quiet)
    frame = pl.DataFrame(
        {
            "blank": stripped.str.len_bytes() == 0,
            "comment": stripped.str.starts_with("#"),
            "event": event,
            "noise": text.str.contains(_NOISE),
            "cont": text.str.contains(_CONTINUATION),
        }
    ).fill_null(False)
    code = frame.select(
        pl.when("blank")
        .then(BLANK)
        .when("comment")
        .then(COMMENT)
        .when("event")
        .then(EVENT)
        .when("noise")
        .then(NOISE)
        .when("cont")
        .then(CONT)
        .otherwise(UNKNOWN)
    ).to_series()
    return code.to_numpy().astype(np.int8)


def settle_continuations(code: np.ndarray) -> np.ndarray:
    """Continuation lines take the class of the block they continue: ignored after
    noise or an event, unrecognized after a record or an unrecognized line.

    ``code`` covers all lines of the file, records marked ``RECORD``."""
    head = np.where((code != CONT) & (code != BLANK), np.arange(code.size), -1)
    head = np.maximum.accumulate(head) if head.size else head
    starts = np.where(head >= 0, code[np.maximum(head, 0)], UNKNOWN)
    quiet = (starts == NOISE) | (starts == EVENT)
    out = code.copy()
    cont = code == CONT
    out[cont & quiet] = NOISE
    out[cont & ~quiet] = UNKNOWN
    return out
