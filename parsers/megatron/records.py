"""Megatron-family training records: wrapped lines joined, step, time and fields read."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from parsers.megatron.layouts import column, read_fields
from parsers.megatron.lines import CONT, PREFIX, RECORD, RECORD_START, ascii_classes, vx

# Fields Megatron prints after the loss: a record that has one of them but no loss
# dropped its loss (NaN, or every iteration of the interval skipped).
AFTER_LOSS = (
    "loss_scale",
    "grad_norm",
    "num_zeros",
    "param_norm",
    "skipped",
    "nan_count",
    "actual_seqlen",
    "curriculum_seqlen",
    "tgs",
)
# Values every rank prints alike: equal ones at the same step are one record printed
# by several ranks.
SAME_RECORD = ("step", "loss", "lr", "grad_norm", "loss_scale", "samples", "tokens")


def record_lines(lines: pl.DataFrame, codes: np.ndarray) -> pl.DataFrame:
    """One row per record: ``line`` (where it starts), ``text`` (continuation lines of
    a wrapped record appended) and ``nlines`` (physical lines it spans)."""
    starts = np.flatnonzero(codes == RECORD)
    recs = lines[starts].with_columns(nlines=pl.lit(1, pl.UInt32))
    conts = np.flatnonzero(codes == CONT)
    if not conts.size:
        return recs
    # each continuation belongs to the record that starts last before it
    owner = starts[np.searchsorted(starts, conts, side="right") - 1]
    pieces = np.concatenate([np.unique(owner), conts])
    rid = np.concatenate([np.unique(owner), owner])
    order = np.lexsort((pieces, rid))
    joined = (
        lines[pieces[order]]
        .with_columns(pl.Series("_rid", rid[order]))
        .group_by("_rid", maintain_order=True)
        .agg(pl.col("line").first(), pl.col("text").str.join(""), pl.len().alias("nlines"))
        .drop("_rid")
    )
    return (
        recs.join(joined, on="line", how="left", suffix="_j", maintain_order="left")
        .with_columns(
            pl.coalesce("text_j", "text").alias("text"),
            pl.coalesce("nlines_j", "nlines").cast(pl.UInt32).alias("nlines"),
        )
        .drop("text_j", "nlines_j")
    )


CHUNK = 125_000  # records read at a time: bounds the memory the split fields take


def read_records(recs: pl.DataFrame) -> pl.DataFrame:
    """The records' metric columns, plus ``text``, ``_cut`` (line cut after its last
    ``|``), ``_loss_absent`` and ``nlines``."""
    if recs.height <= CHUNK:
        return _read_chunk(recs)
    chunks = [recs.slice(i, CHUNK) for i in range(0, recs.height, CHUNK)]
    # polars releases the GIL: chunks read side by side use every core, also for the
    # string operations that run on one thread each
    with ThreadPoolExecutor(max_workers=min(len(chunks), os.cpu_count() or 1, 4)) as pool:
        parts = list(pool.map(_read_chunk, chunks))
    return pl.concat(parts, how="diagonal_relaxed")


def _read_chunk(recs: pl.DataFrame) -> pl.DataFrame:
    text = recs.get_column("text")
    fields = read_fields(_strip_prefix(text))
    its = _iterations(fields, text)
    base = pl.DataFrame(
        {
            "line": recs.get_column("line"),
            "text": text,
            "step": its.get_column("_step"),
            "time": _times(its.get_column("_ts")),
            "nlines": recs.get_column("nlines"),
            "_cut": fields.get_column("_cut").fill_null(False),
            "_loss_absent": fields.get_column("_loss_absent").fill_null(True),
            "_unread": column(fields, "_unread", pl.UInt32).fill_null(0),
        }
    )
    typed = fields.select(c for c in fields.columns if not c.startswith("_"))
    extra = typed.drop([c for c in typed.columns if c in base.columns])
    return pl.concat([base, extra], how="horizontal")


def _strip_prefix(text: pl.Series) -> pl.Series:
    """Record text to split into fields. Prefixes only matter when the first piece is a
    field (GPT-NeoX's ``samples/sec``): then they are taken off."""
    if not text.str.contains("samples/sec", literal=True).any():
        return text
    if text.str.contains(vx(r"^\s*(?:iteration|samples/sec)")).all():
        return text
    return text.str.replace(vx(PREFIX), "")


def _iterations(raw: pl.DataFrame, text: pl.Series) -> pl.DataFrame:
    """Step and time stamp of each record (read with its layout, else by regex)."""
    cols = ["_step", "_ts"]
    if all(c in raw.columns for c in cols) and raw.get_column("_step").null_count() == 0:
        return raw.select(cols)
    found = text.str.extract_groups(ascii_classes(PREFIX + RECORD_START)).struct.unnest()
    found = found.select(
        pl.col("step").cast(pl.Int64, strict=False).alias("_step"),  # beyond int64: none
        pl.col("ts").alias("_ts"),
    )
    if "_step" not in raw.columns:
        return found
    return raw.select(cols).with_columns(pl.col(c).fill_null(found.get_column(c)) for c in cols)


def _times(ts: pl.Series) -> pl.Series:
    if ts.null_count() == ts.len():
        return pl.repeat(None, ts.len(), dtype=pl.Datetime("us", "UTC"), eager=True).alias("time")
    norm = ts.str.replace("T", " ", literal=True).str.replace(",", ".", literal=True)
    return norm.str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_unit="us", time_zone="UTC", strict=False, cache=False
    ).alias("time")


def duplicates(frame: pl.DataFrame, launch_before: pl.Series) -> pl.Series:
    """True for a record that repeats the one before it (same step and values, no
    launch between): the same record printed by another rank."""
    cols = [c for c in SAME_RECORD if c in frame.columns]
    same = pl.all_horizontal(pl.col(c).eq_missing(pl.col(c).shift(1)) for c in cols)
    marks = pl.col("_launch").eq_missing(pl.col("_launch").shift(1))
    return (
        frame.select(cols)
        .with_columns(launch_before.alias("_launch"))
        .select((same & marks & pl.col("step").shift(1).is_not_null()).fill_null(False))
        .to_series()
    )


def missing_loss(frame: pl.DataFrame) -> pl.Series:
    """True for records without a loss field that printed a field that follows it."""
    later = [c for c in AFTER_LOSS if c in frame.columns]
    if not later:
        return pl.repeat(False, frame.height, dtype=pl.Boolean, eager=True)
    return frame.select(
        pl.col("_loss_absent") & pl.any_horizontal(pl.col(c).is_not_null() for c in later)
    ).to_series()


# DeepSpeed's pipeline engine prints its own line for a step (GPT-NeoX, Megatron-DeepSpeed
# with pipeline parallelism), often more often than the framework logs: steps_per_print 10
# beside log_interval 100. Its loss is the step's micro-batch mean.
PIPE_LINE = (
    r"(?:^|[\s\]:])steps: (?P<step>\d{1,18}) loss: (?P<loss>\S+) iter time \(s\): "
    r"(?P<step_time_s>\S+?)(?: samples/sec: (?P<samples_per_second>[^\s|,]+))?\s*$"
)


def pipe_records(lines: pl.DataFrame, candidates: np.ndarray, steps: pl.Series) -> pl.DataFrame:
    """The pipeline engine's lines (among the rows ``candidates`` of ``lines``) of steps
    no framework record gives, one per step, as records (an empty frame: none)."""
    if not candidates.size:
        return pl.DataFrame()
    sub = lines[candidates].select("line", "text")
    sub = sub.filter(pl.col("text").str.contains(" iter time (s): ", literal=True))
    found = sub.with_columns(
        sub.get_column("text").str.extract_groups(PIPE_LINE).alias("_g")
    ).unnest("_g")
    if "step" not in found.columns:
        return pl.DataFrame()
    num = ("loss", "step_time_s", "samples_per_second")
    found = found.filter(pl.col("step").is_not_null()).select(
        "line",
        "text",
        pl.col("step").cast(pl.Int64, strict=False),
        *(pl.col(c).cast(pl.Float64, strict=False) for c in num),
    )
    found = found.filter(
        pl.col("step").is_not_null() & ~pl.col("step").is_in(steps.drop_nulls().implode())
    ).unique("step", keep="first", maintain_order=True)
    return found.with_columns(
        pl.lit(None, pl.Datetime("us", "UTC")).alias("time"),
        pl.lit(1, pl.UInt32).alias("nlines"),
        pl.lit(False).alias("_cut"),
        pl.col("loss").is_null().alias("_loss_absent"),
        pl.lit(0, pl.UInt32).alias("_unread"),
    )
