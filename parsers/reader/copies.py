"""Per-rank copies of one record: every rank prints the same step with the same loss
(only throughput jittering), interleaved or in blocks, one rank's lines after the
other's. Kept once, counted as ignored lines with a caveat. A step printed again after a
launch or crash line is a recomputed step, not a copy."""

from __future__ import annotations

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from parsers.runs import launch_lines

_LAUNCH = ("restart", "hardware_failure")
# A file written twice over (two writers appending to it, a record or two apart): where a
# third of the records or more repeat a step printed at most NEAR_ROWS records (and
# NEAR_S seconds) before with a loss within NEAR of it (relative), those repeats are
# copies, and so are the others within WRITTEN_TWICE (the writers' losses drift apart)
NEAR = 5e-3
NEAR_ROWS = 6
NEAR_S = 120
WRITTEN_TWICE = 0.05


def drop_rank_copies(parsed: Parsed) -> Parsed:
    """``parsed`` without the records that repeat the step and loss of an earlier record
    of the same launch, and the repeats of a file written twice over (see ``NEAR``)."""
    m = parsed.metrics
    if m.height < 2 or "step" not in m.columns or "loss" not in m.columns:
        return parsed
    step = m.get_column("step")
    if step.null_count() == m.height or (
        "_run" not in m.columns and (step.diff().drop_nulls() > 0).all()
    ):
        return parsed  # steps only go forward: no copies (the common case)
    # launches and crashes between two records make them records of different launches
    marks = launch_lines(parsed.events, _LAUNCH)
    # only records whose step occurs more than once can be copies (after a rewind, a
    # few thousand of a million): the rest is not looked at again
    dup = _repeated_steps(step)
    if not dup.any():
        return parsed
    timed = ["time"] if "time" in m.columns else []
    by = ["_run"] if "_run" in m.columns else []
    measures = _measures(m)
    back = (step <= step.cum_max().shift(1)).fill_null(False).alias("_back")
    rows = m.select("line", "step", "loss", *timed, *by, *measures).with_row_index("_i")
    rows = rows.with_columns(back)
    launch = np.searchsorted(marks, rows.get_column("line").to_numpy(), side="left")
    rows = rows.with_columns(pl.Series("_launch", launch, pl.Int64))
    # a file written twice over: a copy may differ in the loss's last digit (0.8548,
    # then 0.8547); looked for among all records (the neighbours tell a rerun)
    ks = range(1, NEAR_ROWS + 1)
    # (a near repeat repeats a step: with fewer repeated steps than a third of the
    # records, the file was not written twice over, and nothing more is looked at)
    twice = int(dup.sum()) * 3 >= m.height
    if twice:
        near = rows.select(pl.any_horizontal(_near(k, by, NEAR, timed) for k in ks))
        twice = near.to_series().sum() * 3 >= m.height  # (else a rerun, not copies)
    if twice:
        near = rows.select(pl.any_horizontal(_near(k, by, WRITTEN_TWICE, timed) for k in ks))
        rows = rows.with_columns(near.to_series().alias("_near"))
    rows = rows.filter(dup)
    loss = pl.col("loss").cast(pl.Float64)
    # records of different named runs (a W&B export of several) are never copies
    run = [pl.col("_run")] if "_run" in m.columns else []
    key = pl.struct(
        *run,
        pl.col("_launch"),
        pl.col("step"),
        loss.fill_nan(None).alias("l"),
        loss.is_nan().alias("n"),
    )
    raw = ~(key.is_first_distinct() | pl.col("step").is_null() | pl.col("loss").is_null())
    # a copy comes near its record (ranks interleaved) or among other copies with all
    # their measures alike (a rank's block after another's); a record far from the first
    # that repeats its step and rounded loss only (a second launch of one seed, a second
    # run pasted after the first: its other measures differ) is a record
    same_all = ~pl.struct(key, *[pl.col(c) for c in measures]).is_first_distinct()
    flags = rows.select(
        raw.alias("c"),
        (raw & same_all).alias("a"),
        (pl.col("_i") - pl.col("_i").first().over(key)).alias("d"),
    )
    c, a = flags.get_column("c"), flags.get_column("a")
    among = a & (a.shift(1, fill_value=False) | a.shift(-1, fill_value=False))
    copy = pl.Series(c & ((flags.get_column("d") <= NEAR_ROWS) | among))
    copy = copy & ~_diverged(rows.get_column("_i"), c, rows.get_column("_back"))
    if twice:
        copy = copy | rows.get_column("_near")
    gone = rows.filter(copy).get_column("_i")
    if gone.len() == 0:
        return parsed
    kept = m.with_row_index("_i").filter(~pl.col("_i").is_in(gone.implode())).drop("_i")
    dropped = m.height - kept.height
    # the lines the copies stood on are ignored now, unless a kept record shares one
    # (records glued onto one line) or an event was read from it (a results table's row
    # is a record and a validation event): it is an event line then
    gone_lines = m.get_column("line").gather(gone).unique()
    told = [e.source.line for e in parsed.events if e.source and e.source.line is not None]
    taken = pl.concat([kept.get_column("line"), pl.Series("line", told, pl.Int64)])
    freed = int((~gone_lines.is_in(taken.implode())).sum())
    meta = dict(parsed.meta)
    meta["caveats"] = [*meta.get("caveats", []), f"{dropped} per-rank copies of records dropped"]
    meta["rank_copies"] = meta.get("rank_copies", 0) + dropped
    return Parsed(
        metrics=kept,
        events=parsed.events,
        meta=meta,
        unrecognized=parsed.unrecognized,
        ignored=parsed.ignored + freed,
    )


_JITTER = ("time", "tps", "tflop", "mfu", "throughput", "eta", "mem", "speed", "sec", "per_s")


def _measures(m: pl.DataFrame) -> list[str]:
    """The columns a rank's copy shares with its record: numbers other than the step,
    the loss and what jitters from rank to rank (times, throughput, memory)."""
    skip = {"line", "step", "loss", "segment", "source", "_run"}
    return [
        c
        for c, t in m.schema.items()
        if c not in skip and t.is_numeric() and not any(j in c for j in _JITTER)
    ]


def _near(k: int, run: list[str], tol: float, timed: list[str]) -> pl.Expr:
    """True where the record ``k`` before this one has the same step, launch and run and a
    loss within ``tol`` (relative) of this one's, printed within ``NEAR_S`` of it where
    both have a time (two runs of one config, hours apart, have losses as close), and the
    records beside the two are not such a pair too (a rerun of a few steps repeats its
    neighbours; a writer's copy sits among the other writer's new steps)."""
    step = pl.col("step")
    loss, prev = pl.col("loss").cast(pl.Float64), pl.col("loss").cast(pl.Float64).shift(k)
    same = [pl.col(c) == pl.col(c).shift(k) for c in ("step", "_launch", *run)]
    close = (loss - prev).abs() <= tol * pl.max_horizontal(loss.abs(), prev.abs())
    rerun = (step.shift(1) == step.shift(1 + k)).fill_null(False) | (
        step.shift(-1) == step.shift(k - 1)
    ).fill_null(False)
    soon = pl.lit(True)
    for c in timed:
        apart = (pl.col(c) - pl.col(c).shift(k)).dt.total_seconds().abs()
        soon = soon & (apart <= NEAR_S).fill_null(True)
    return (pl.all_horizontal(same) & soon & close & ~rerun).fill_null(False)


def _diverged(i: pl.Series, c: pl.Series, back: pl.Series) -> pl.Series:
    """Repeats that open a second run of the same seed, not copies: a stretch of records
    (one after the other in the file) that repeat earlier records exactly, right after
    which comes another repeated step whose loss differs (two runs pasted one after the
    other whose first steps agree, then part; a rank's copies go on to the end of its
    block, or come before a step not printed yet)."""
    nxt = (i.shift(-1) == i + 1).fill_null(False)
    after_c, after_back = c.shift(-1, fill_value=False), back.shift(-1, fill_value=False)
    starts = c & ~(c.shift(1, fill_value=False) & (i.shift(1) == i - 1).fill_null(False))
    stretch = starts.cast(pl.Int64).cum_sum()
    parted = (c & nxt & ~after_c & after_back).cast(pl.Int8)
    frame = pl.DataFrame({"s": stretch, "p": parted, "c": c})
    return frame.select(pl.col("c") & (pl.col("p").max().over("s") > 0)).to_series()


def _repeated_steps(step: pl.Series) -> pl.Series:
    """True for every record whose step occurs more than once, and maybe a few more:
    a repeat comes at or below the highest step before it, so only the steps of such
    records are looked up (a hash of all steps costs more than the cumulative max)."""
    back = (step <= step.cum_max().shift(1)).fill_null(False)
    if not back.any():
        return back
    return back | step.is_in(step.filter(back).unique().implode()).fill_null(False)
