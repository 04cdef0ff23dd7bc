"""One launch's scalar points -> a wide metrics frame and validation events.

Points of the training tags are pivoted into one record per step (a tag logged twice at
one step within a launch makes a second record: no point is dropped or averaged), with
``line`` = the number of the first event record of that step in the launch's event file
and ``time`` = its wall time. Points of sub-writer files are placed by wall time
between the main file's records. Evaluation points become one ``validation`` event per
split and step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers import tags as tt
from parsers.columns import with_core
from parsers.tensorboard.file import EventFile
from parsers.tensorboard.runs import Launch

_TIME = pl.Datetime("us", "UTC")


@dataclass
class _Frame:
    points: pl.DataFrame  # line, tag (name), step, wall, value, split (null: training)
    other_axis: int
    caveats: list[str]
    used: int  # records of the main file that gave a kept point


def _file_points(ef: EventFile, rename: str | None, split: str | None) -> pl.DataFrame:
    pts = ef.points
    tags = pts.tags
    if rename is not None:
        tags = [rename if rename.startswith(t) else f"{rename}/{t}" for t in tags]
    names = pl.Series(tags, dtype=pl.String)
    return pl.DataFrame(
        {
            "record": pts.record + 1,
            "tag": names.gather(pts.tag) if tags else pl.Series([], dtype=pl.String),
            "step": pts.step,
            "wall": pts.wall,
            "value": pts.value,
        },
        schema_overrides={"tag": pl.String},
    ).with_columns(pl.lit(split, dtype=pl.String).alias("split"))


def _placed(main: pl.DataFrame, other: pl.DataFrame) -> pl.DataFrame:
    """Points of another file, given the line of the main file's last point written
    before them (1 when none was)."""
    walls = np.maximum.accumulate(np.nan_to_num(main.get_column("wall").to_numpy(), nan=-np.inf))
    lines = main.get_column("record").to_numpy()
    w = np.nan_to_num(other.get_column("wall").to_numpy(), nan=-np.inf)
    k = np.searchsorted(walls, w, side="right") - 1
    line = np.where(k >= 0, lines[np.maximum(k, 0)], 1) if lines.size else np.ones(w.size, int)
    return other.with_columns(pl.Series("record", line, dtype=pl.Int64))


def gather(launch: Launch) -> _Frame:
    main = _file_points(launch.main, None, None)
    parts = [main]
    caveats = list(launch.main.caveats)
    for ef, prefix in launch.subs:
        parts.append(_placed(main, _file_points(ef, prefix, None)))
        caveats += ef.caveats
    for ef, split in launch.evals:
        parts.append(_placed(main, _file_points(ef, None, split)))
        caveats += ef.caveats
    pts = (
        pl.concat(parts)
        .rename({"record": "line"})
        .with_columns(pl.Series("_main", np.arange(sum(p.height for p in parts)) < main.height))
    )
    distinct = pts.get_column("tag").unique().to_list()
    alt = pl.col("tag").replace_strict({t: tt.other_axis(t) for t in distinct}, default=False)
    split = pl.col("tag").replace_strict(
        {t: tt.eval_split(t) for t in distinct}, default=None, return_dtype=pl.String
    )
    other_axis = int(pts.select(alt.sum()).item()) if pts.height else 0
    pts = pts.filter(~alt).with_columns(pl.coalesce(pl.col("split"), split).alias("split"))
    used = int(pts.filter(pl.col("_main")).get_column("line").n_unique())
    pts = pts.drop("_main")
    return _Frame(pts, other_axis, caveats, used)


_MAX_WALL = 1e11  # seconds (year 5138): larger is no clock reading


def _plausible(secs: pl.Expr) -> pl.Expr:
    """A wall time that is a clock reading (not NaN, not a corrupt double)."""
    return secs.is_finite() & (secs > 0) & (secs < _MAX_WALL)


def metrics(points: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The training points as one row per step, and how many points repeated a tag at
    a step with another value (the last one is kept).

    A tag whose step goes back (a rewind inside one writer) starts a new pass: its
    points make new rows, so the stitcher sees the rewind."""
    train = points.filter(pl.col("split").is_null())
    if train.height == 0:
        empty = pl.DataFrame(schema={"line": pl.Int64, "time": _TIME, "step": pl.Int64})
        return empty, 0
    names = tt.columns(train.get_column("tag").unique(maintain_order=True).to_list())
    back = (pl.col("step") < pl.col("step").shift(1)).fill_null(False)
    train = (
        train.with_columns(pl.col("tag").replace_strict(names).alias("col"))
        .sort("line", maintain_order=True)
        .with_columns(back.cum_sum().over("col").alias("_k"))
    )
    cells = train.group_by("_k", "step", "col", maintain_order=True).agg(
        pl.col("value").last(),
        (pl.col("value").n_unique() - 1).alias("_dup"),
        pl.col("line").first(),
        pl.col("wall").first(),
    )
    repeats = int(cells.get_column("_dup").sum())
    keys = (
        cells.sort("line", maintain_order=True)
        .group_by("_k", "step", maintain_order=True)
        .agg(pl.col("line").first(), pl.col("wall").first())
    )
    wide = cells.pivot(on="col", index=["_k", "step"], values="value")
    out = keys.join(wide, on=["_k", "step"]).sort("line", "_k", maintain_order=True)
    secs = pl.col("wall")
    time = (
        pl.when(_plausible(secs))
        .then(pl.from_epoch((secs * 1e6).round(0).cast(pl.Int64, strict=False), time_unit="us"))
        .dt.replace_time_zone("UTC")
        .alias("time")
    )
    casts = [
        pl.col(c).round(0).cast(pl.Int64, strict=False) for c in tt.INTEGER if c in out.columns
    ]
    return out.with_columns(time, *casts).drop("_k", "wall"), repeats


def validations(points: pl.DataFrame, name: str) -> list[EventBase]:
    """One ``validation`` event per split and step (and per repeat of a step)."""
    ev = points.filter(pl.col("split").is_not_null())
    if ev.height == 0:
        return []
    tags = ev.select("tag", "split").unique(maintain_order=True)
    keys = {
        (t, s): (tt.eval_key(t, s) if s in tt.words(t) else tt.snake(t))
        for t, s in tags.iter_rows()
    }
    ev = ev.sort("line", maintain_order=True).with_columns(
        pl.int_range(pl.len()).over("split", "tag", "step").alias("_k")
    )
    groups = ev.group_by("split", "step", "_k", maintain_order=True).agg(
        pl.col("line").min(), pl.col("wall").min(), pl.col("tag"), pl.col("value")
    )
    out: list[EventBase] = []
    for split, step, _, line, wall, tag_list, values in groups.sort("line").iter_rows():
        out.append(
            Validation(
                step=step,
                time=_utc(wall) if wall is not None and 0 < wall < _MAX_WALL else None,
                split=split,
                values={keys[(t, split)]: v for t, v in zip(tag_list, values, strict=True)},
                source=Source(file=name, line=line),
            )
        )
    return out


def _utc(wall: float):
    from datetime import UTC, datetime, timedelta

    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=round(wall * 1e6))


def to_parsed(launch: Launch, name: str) -> Parsed:
    frame = gather(launch)
    m, repeats = metrics(frame.points)
    if repeats:
        frame.caveats.append(
            f"{launch.main.path.name}: {repeats} point(s) logged again at a step that had "
            "another value for the tag: the last one kept"
        )
    events = validations(frame.points, name)
    ef = launch.main
    caveats = frame.caveats + _ignored_note(launch, frame.other_axis)
    return Parsed(
        metrics=with_core(m),
        events=events,
        meta={
            "run": launch.run or None,
            "caveats": caveats,
            "records": ef.records,
            "records_used": frame.used,
        },
        unrecognized=pl.Series("line", ef.bad, dtype=pl.Int64),
        ignored=ef.records - frame.used - int(ef.bad.size),
    )


def _ignored_note(launch: Launch, other_axis: int) -> list[str]:
    out = []
    kinds: dict[str, int] = {}
    for ef in [launch.main] + [f for f, _ in launch.subs + launch.evals]:
        for k, v in ef.kinds.items():
            kinds[k] = kinds.get(k, 0) + v
    what = ", ".join(f"{v} {k}" for k, v in kinds.items() if "without a summary" not in k)
    if what:
        out.append(f"{launch.main.path.name}: non-scalar summaries ignored ({what})")
    if other_axis:
        out.append(
            f"{other_axis} point(s) of '... vs samples/tokens' tags ignored: they repeat the "
            "per-iteration tags against another x-axis"
        )
    subs = [ef for ef, _ in launch.subs + launch.evals]
    if subs:
        names = ", ".join(ef.path.parent.name + "/" + ef.path.name for ef in subs)
        out.append(f"points of sub-writer event files merged by wall time: {names}")
    return out
