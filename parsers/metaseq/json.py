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

from parsers import json_decode as jd
from parsers.metaseq import records as mr
from parsers.metaseq.lines import read_times, timestamps
from parsers.metaseq.parts import in_parts

MARK = "| train_inner | {"
HYDRA_MARK = "][train_inner][INFO] - {"  # fairseq-hydra-train: ``[time][tag][LEVEL] - {``
_TAGGED = r"\| ([^|{}]+?) \| (\{.*)$|\]\[([^\]\[{}|]+?)\]\[[A-Z]+\] - (\{.*)$"
_BARE = r"^\s*(?:\|\s*)?(\{.*)$"
_VALID = r"^(?:valid|test)"
_OFFSETS = 16  # payload offsets cut one by one (see _payloads)


def find(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The JSON progress lines: the training records (``line``, ``payload``, ``time``),
    and the others (``line``, ``text``, ``tag``, ``payload``, ``time``), in line order.

    The records are most of a log: their text is cut once and not copied around."""
    text = pl.col("text")
    mark = pl.coalesce(
        text.str.find(MARK, literal=True) + (len(MARK) - 1),
        text.str.find(HYDRA_MARK, literal=True) + (len(HYDRA_MARK) - 1),
    ).alias("pos")
    pos = in_parts(lines.select("text"), lambda lf: lf.select(mark)).to_series()
    found = pos.is_not_null()
    records = lines.filter(found).with_columns(pos.filter(found).alias("start"))
    inner = _payloads(records).with_columns(read_times(records.get_column("text")))
    rest = lines.filter(~found)
    rest = rest.filter(pl.col("text").str.contains("{", literal=True))
    tag = pl.coalesce(text.str.extract(_TAGGED, 1), text.str.extract(_TAGGED, 3))
    payload = pl.coalesce(text.str.extract(_TAGGED, 2), text.str.extract(_TAGGED, 4))
    tagged = rest.with_columns(tag.str.strip_chars().alias("tag"), payload.alias("payload")).filter(
        pl.col("payload").is_not_null()
    )
    bare = rest.filter(
        payload.is_null()
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


def _payloads(records: pl.DataFrame) -> pl.DataFrame:
    """``line`` and ``payload``: the text from the ``{`` after ``MARK`` on (``start``:
    its byte offset). A slice at a fixed offset shares the text's bytes, one at a
    per-row offset copies them: so each of the (few) offsets found gets its own slice.
    Slices count characters: a line with others than ASCII is cut again, exactly."""
    offsets = records.get_column("start").unique().sort().to_list()
    start, text = pl.col("start"), pl.col("text")
    cut = text.str.slice(start)
    if offsets and len(offsets) <= _OFFSETS:
        cut = pl.when(start == offsets[0]).then(text.str.slice(offsets[0]))
        for at in offsets[1:]:
            cut = cut.when(start == at).then(text.str.slice(at))
    plain = (text.str.len_chars() == text.str.len_bytes()).alias("plain")
    inner = in_parts(records, lambda lf: lf.select("line", cut.alias("payload"), plain))
    other = ~inner.get_column("plain")
    if other.any():
        # (cut again in Python, where a string's offsets count characters whatever the
        # polars release counts in ``str.find``)
        texts = records.filter(other).get_column("text").to_list()
        exact = pl.Series("payload", [_payload(t) for t in texts], dtype=pl.String)
        inner = inner.with_columns(inner.get_column("payload").scatter(other.arg_true(), exact))
    return inner.drop("plain")


def _payload(text: str) -> str | None:
    """The text from the ``{`` of the first mark on (None: no mark)."""
    for mark in (MARK, HYDRA_MARK):
        at = text.find(mark)
        if at >= 0:
            return text[at + len(mark) - 1 :]
    return None


def _bare_tag(payload: pl.Expr) -> pl.Expr:
    prefix = payload.str.extract(r'"((?:valid|test|train)[^"]*?)_(?:loss|num_updates)"', 1)
    return pl.when(prefix.is_not_null()).then(prefix).otherwise(pl.lit("train_inner"))


def is_validation(tag: pl.Expr) -> pl.Expr:
    return tag.str.contains(_VALID)


def decode_records(found: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
    """Decode record payloads into Float64 columns (``parsers.metaseq.records``) plus
    ``line`` and ``time``; also the lines whose payload is not a JSON object
    (truncated, corrupted). Keys ``line`` and ``time`` become ``line_value``..."""
    frame, rows, bad = mr.decode(found.get_column("payload"))
    frame = frame.rename({c: f"{c}_value" for c in ("line", "time") if c in frame.columns})
    keep = found.select("line", "time")
    if rows.size != found.height:
        keep = keep[rows]
    frame = pl.concat([keep, frame], how="horizontal")
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
