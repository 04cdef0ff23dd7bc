"""metaseq/fairseq JSON progress lines: find them, cut the payload, decode it.

``<prefix><date> <time> | INFO | <tag> | {json}``: tag ``train_inner`` is a training
record, ``valid``/``valid_*``/``valid/<subset>`` (and ``test...``) a validation result
whose keys carry the tag as prefix (``valid_loss``), ``train`` the end-of-epoch summary.
fairseq before 0.10 printed the same objects bare, one per line, without the tag; their
kind is read off the keys (``valid_loss`` -> validation, ``train_loss`` -> summary).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from parsers import _jsonl_decode as jd
from parsers._metaseq_lines import timestamps

MARK = "| train_inner | {"
_TAGGED = r"\| ([^|{}]+?) \| (\{.*)$"
_BARE = r"^\s*(?:\|\s*)?(\{.*)$"
_VALID = r"^(?:valid|test)"


def find(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The JSON progress lines: the training records (``line``, ``payload``, ``time``),
    and the others (``line``, ``text``, ``tag``, ``payload``, ``time``), in line order.

    The records are most of a log: their text is cut once and not copied around."""
    text = lines.get_column("text")
    pos = text.str.find(MARK, literal=True)
    inner = (
        lines.with_columns(pos.alias("_pos"))
        .filter(pl.col("_pos").is_not_null())
        .select(
            "line",
            pl.col("text").str.slice(pl.col("_pos") + len(MARK) - 1).alias("payload"),
            timestamps(pl.col("text")),
        )
    )
    rest = lines.filter(pos.is_null() & text.str.contains("{", literal=True))
    tagged = rest.with_columns(
        pl.col("text").str.extract(_TAGGED, 1).str.strip_chars().alias("tag"),
        pl.col("text").str.extract(_TAGGED, 2).alias("payload"),
    ).filter(pl.col("payload").is_not_null())
    bare = rest.filter(
        pl.col("text").str.extract(_TAGGED, 2).is_null()
        & pl.col("text").str.contains(_BARE)
        & pl.col("text").str.contains('"epoch"', literal=True)
    ).with_columns(pl.col("text").str.extract(_BARE, 1).alias("payload"))
    bare = bare.with_columns(_bare_tag(pl.col("payload")).alias("tag"))
    other = pl.concat([tagged, bare.select(tagged.columns)]).sort("line")
    other = other.with_columns(timestamps(pl.col("text")))
    is_record = pl.col("tag") == "train_inner"
    if other.filter(is_record).height:  # fairseq's bare records
        inner = pl.concat([inner, other.filter(is_record).select(inner.columns)]).sort("line")
    return inner, other.filter(~is_record)


def _bare_tag(payload: pl.Expr) -> pl.Expr:
    prefix = payload.str.extract(r'"((?:valid|test|train)[^"]*?)_(?:loss|num_updates)"', 1)
    return pl.when(prefix.is_not_null()).then(prefix).otherwise(pl.lit("train_inner"))


def is_validation(tag: pl.Expr) -> pl.Expr:
    return tag.str.contains(_VALID)


def decode_records(found: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
    """Decode record payloads into text columns plus ``line`` and ``time``;
    also the lines whose payload is not a JSON object (truncated, corrupted)."""
    payload = found.get_column("payload")
    frame, slow, bad = jd.decode(payload, strings=True)
    if slow:
        extra = pl.DataFrame([{jd.ROW: s[jd.ROW], **s["obj"]} for s in slow])
        extra = extra.with_columns(pl.exclude(jd.ROW).cast(pl.String))
        frame = pl.concat([frame, extra], how="diagonal_relaxed").sort(jd.ROW)
    rows = frame.get_column(jd.ROW)
    frame = frame.rename({c: f"{c}_value" for c in ("line", "time") if c in frame.columns})
    keep = found.select("line", "time")[rows]
    frame = pl.concat([keep, frame.drop(jd.ROW)], how="horizontal")
    bad_lines = found.get_column("line").to_numpy()[bad] if bad.size else bad
    return frame, bad_lines


def decode_objects(found: pl.DataFrame) -> tuple[list[dict], np.ndarray]:
    """Decode the few non-record payloads (validation, summaries) one by one in Python;
    returns ``{"line", "time", "tag", "text", "obj"}`` dicts and the lines that failed."""
    payload = found.get_column("payload")
    frame, slow, bad = jd.decode(payload, strings=True)
    objs = {s[jd.ROW]: s["obj"] for s in slow}
    for row in frame.iter_rows(named=True):
        i = row.pop(jd.ROW)
        objs[i] = {k: v for k, v in row.items() if v is not None}
    meta = found.select("line", "time", "tag", "text").to_dicts()
    out = [{**meta[i], "obj": objs[i]} for i in sorted(objs)]
    bad_lines = found.get_column("line").to_numpy()[bad] if bad.size else bad
    return out, bad_lines
