"""fairseq's ``simple`` progress format: find the records and validation lines.

Training record (``SimpleProgressBar.log``; ``| `` in front before fairseq 0.10, the
logging layout after)::

    epoch 001:    100 / 2952087 loss=16.348, ppl=83437.5, ..., num_updates=100, wall=120

Validation result (``SimpleProgressBar.print`` with the ``valid on`` prefix)::

    epoch 001 | valid on 'valid' subset | loss 9.634 | ppl 794.4 | num_updates 1000

The ``key=value`` pairs are rewritten as a JSON object of strings, so the records go
through the same vectorized decoder as the JSON format. A record cut short keeps the
pairs it has; a key without its value (``wall=``) is null.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from parsers import json_decode as jd
from parsers.metaseq.lines import timestamps

RECORD = r"epoch (\d+):\s+(\d+)(?:\s*/\s*\d+)?\s+([A-Za-z_][\w./-]*=.*)$"
VALID = r"epoch (\d+) \| valid on '([^']*)' subset \| (.*)$"
# the end-of-epoch training summary: ``epoch 079 | loss 3.536 | ... | num_updates 20077``
SUMMARY = r"epoch (\d+) \| ((?:[A-Za-z_][\w./-]* [^|]*\| )*num_updates \d+.*)$"
_PAIR = r"[A-Za-z_][\w./-]*=[^,\s]*"


def find_records(lines: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
    """Record lines: ``line``, ``time``, ``counter`` (the in-epoch batch counter) and the
    text columns of their pairs; also the lines whose pairs could not be read (a value
    holding a quote or a backslash)."""
    text = pl.col("text")
    rec = lines.filter(text.str.contains(RECORD)).with_columns(
        text.str.extract(RECORD, 2).cast(pl.Int64, strict=False).alias("counter"),
        timestamps(text),
        text.str.extract(RECORD, 3).alias("body"),
    )
    as_json = (
        pl.col("body")
        .str.extract_all(_PAIR)
        .list.eval(pl.element().str.replace(r"^([^=]+)=(.*)$", '"$1": "$2"'))
        .list.join(", ")
    )
    payload = rec.select(pl.concat_str(pl.lit("{"), as_json, pl.lit("}"))).to_series()
    frame, _, _ = jd.decode(payload, strings=True)
    rows = frame.get_column(jd.ROW)
    read = np.zeros(rec.height, dtype=bool)
    read[rows.to_numpy()] = True
    bad = rec.get_column("line").to_numpy()[~read]
    found = pl.concat(
        [rec.select("line", "time", "counter")[rows], frame.drop(jd.ROW)], how="horizontal"
    )
    return found, bad


def find_validation(lines: pl.DataFrame) -> pl.DataFrame:
    """Validation lines: ``line``, ``time``, ``text``, ``split`` and ``pairs``."""
    text = pl.col("text")
    return lines.filter(text.str.contains(VALID)).with_columns(
        timestamps(text),
        text.str.extract(VALID, 2).alias("split"),
        text.str.extract(VALID, 3).alias("pairs"),
    )


def find_summaries(lines: pl.DataFrame) -> pl.DataFrame:
    """End-of-epoch training summaries: ``line``, ``time`` and ``pairs``."""
    text = pl.col("text")
    hit = text.str.contains(SUMMARY) & ~text.str.contains(VALID)
    return lines.filter(hit).with_columns(
        timestamps(text), text.str.extract(SUMMARY, 2).alias("pairs")
    )


def pipe_pairs(pairs: str) -> dict[str, str]:
    """``loss 9.634 | ppl 794.4`` -> ``{"loss": "9.634", "ppl": "794.4"}``."""
    out: dict[str, str] = {}
    for part in pairs.split(" | "):
        key, _, value = part.strip().partition(" ")
        if key:
            out[key] = value.strip()
    return out
