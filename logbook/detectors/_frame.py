"""The frame detectors read: the trajectory, plus the stretches a restart overwrote.

The trajectory (``Run.trajectory()``) is what survived the rewinds, in step order: a
restart that resumes from a checkpoint leaves no jump in it. But what made the team
rewind (a spike, a divergence) lies in the records the restart recomputed, which the
trajectory drops. So the analysis frame holds several *lineages*:

- lineage 0: the trajectory;
- lineage k > 0: the superseded records of one segment, preceded by the last
  ``CONTEXT_RECORDS`` trajectory records before them (``report`` is False on those: they
  give the rolling windows their history and are reported in lineage 0).

Columns added: ``lineage`` (Int32), ``report`` (Boolean), ``restart_age`` (records since
the last segment boundary in the lineage; ``NO_RESTART`` where there was none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from logbook.detectors._arrays import ROW_COLUMNS, Rows, block_noise, log_values, rows_of
from logbook.run import Run
from logbook.schema import EventBase

CONTEXT_RECORDS = 256
NO_RESTART = 1 << 30


@dataclass
class Context:
    """A run prepared for detection."""

    run: Run
    frame: pl.DataFrame
    interval: int = 1  # median step distance between consecutive records
    events: list[EventBase] = field(default_factory=list)
    _rows: dict[tuple[str, bool], Rows] = field(default_factory=dict, repr=False)
    _has: dict[str, bool] = field(default_factory=dict, repr=False)
    _base: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _noise: dict[tuple[str, bool, int], np.ndarray] = field(default_factory=dict, repr=False)

    def noise(self, column: str, magnitude: bool, block: int) -> np.ndarray:
        """``block_noise`` of ``rows(column, magnitude)`` (cached)."""
        key = (column, magnitude, block)
        if key not in self._noise:
            rows = self.rows(column, magnitude)
            self._noise[key] = block_noise(rows.y, rows.lineage, block)
        return self._noise[key]

    def rows(self, column: str, magnitude: bool = False) -> Rows:
        """The rows where ``column`` has a usable value, ``y`` its log (cached: several
        detectors read the same metric)."""
        key = (column, magnitude)
        if key not in self._rows:
            self._rows[key] = self.rows_from(log_values(self.frame, column, magnitude))
        return self._rows[key]

    def rows_from(self, y: np.ndarray) -> Rows:
        """The rows where ``y`` (one value per frame row) is finite."""
        if not self._base:
            self._base.update({c: self.frame.get_column(c).to_numpy() for c in ROW_COLUMNS})
        return rows_of(self._base, y)

    def has(self, column: str) -> bool:
        """Whether the frame has the column with at least one finite or non-null value."""
        if column not in self._has:
            if column not in self.frame.columns:
                self._has[column] = False
            else:
                col = self.frame.get_column(column)
                ok = col.is_finite().any() if col.dtype.is_float() else col.is_not_null().any()
                self._has[column] = bool(ok)
        return self._has[column]

    @property
    def lineages(self) -> int:
        return int(self.frame.get_column("lineage").max() or 0) + 1 if self.frame.height else 0


def build_context(run: Run) -> Context:
    """The analysis frame of a run (see the module docstring)."""
    if run.metrics.get_column("segment").null_count():  # a run built without segments
        filled = run.metrics.with_columns(pl.col("segment").fill_null(0))
        run = Run(metrics=filled, events=run.events, meta=run.meta)
    metrics = run.metrics.filter(pl.col("step").is_not_null())
    traj, superseded = split_trajectory(metrics)
    frames = [traj.with_columns(pl.lit(0, pl.Int32).alias("lineage"), pl.lit(True).alias("report"))]
    if superseded.height:
        tsteps = traj.get_column("step").to_numpy()
        for k, seg in enumerate(superseded.get_column("segment").unique(maintain_order=True)):
            own = superseded.filter(pl.col("segment") == seg).sort("step")
            cut = int(np.searchsorted(tsteps, own.get_column("step")[0], side="left"))
            ctx = traj.slice(max(0, cut - CONTEXT_RECORDS), min(cut, CONTEXT_RECORDS))
            part = pl.concat(
                [
                    ctx.with_columns(pl.lit(False).alias("report")),
                    own.with_columns(pl.lit(True).alias("report")),
                ],
                how="diagonal_relaxed",
            )
            frames.append(part.with_columns(pl.lit(k + 1, pl.Int32).alias("lineage")))
    frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    frame = _restart_age(frame)
    return Context(run=run, frame=frame, interval=_interval(traj), events=list(run.events))


def split_trajectory(metrics: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(trajectory, superseded records) of a metrics frame whose rows all have a step.

    The trajectory keeps, for each step, the record of the last segment that reached it,
    in step order (as ``Run.trajectory``); the superseded records are the others, in
    their order."""
    step = metrics.get_column("step").to_numpy()
    if step.size < 2 or bool(np.all(step[1:] > step[:-1])):
        return metrics, metrics.clear()
    seg = metrics.get_column("segment").to_numpy()
    if not bool(np.all(seg[1:] >= seg[:-1])):  # rows not in launch order: the general way
        traj = Run(metrics=metrics).trajectory()
        rest = metrics.join(traj.select("segment", "step"), on=["segment", "step"], how="anti")
        return traj, rest
    # a record can be overwritten only if a later record has a step as small: few rows,
    # found in O(n); only the rows sharing their steps are sorted
    later_min = np.r_[np.minimum.accumulate(step[::-1])[::-1][1:], np.iinfo(np.int64).max]
    cand = np.flatnonzero(later_min <= step)
    rel = np.flatnonzero(np.isin(step, np.unique(step[cand]), kind="table"))
    order = np.lexsort((rel, step[rel]))  # by step, then row (= launch) order
    ordered = step[rel][order]
    drop = np.sort(rel[order[np.r_[ordered[1:] == ordered[:-1], False]]])
    keep = np.ones(step.size, dtype=bool)
    keep[drop] = False
    traj = metrics.filter(pl.Series(keep))
    tsteps = traj.get_column("step").to_numpy()
    if not bool(np.all(tsteps[1:] > tsteps[:-1])):  # old records between re-logged ones
        traj = traj.sort("step", maintain_order=True)
    return traj, metrics[drop]


def _restart_age(frame: pl.DataFrame) -> pl.DataFrame:
    """Records since the last segment boundary of the lineage (``NO_RESTART``: none)."""
    if frame.height == 0:
        return frame.with_columns(pl.lit(None, pl.Int64).alias("restart_age"))
    seg, lineage, idx = pl.col("segment"), pl.col("lineage"), pl.int_range(pl.len())
    new_lineage = (lineage != lineage.shift(1)).fill_null(True)
    boundary = (seg != seg.shift(1)).fill_null(False) & ~new_lineage
    # index of the last boundary, -1 from the start of each lineage until its first
    last = pl.when(boundary).then(idx).when(new_lineage).then(-1).otherwise(None)
    last = last.forward_fill()
    age = pl.when(last < 0).then(NO_RESTART).otherwise(idx - last)
    return frame.with_columns(age.cast(pl.Int64).alias("restart_age"))


def _interval(traj: pl.DataFrame) -> int:
    if traj.height < 2:
        return 1
    d = traj.get_column("step").diff().drop_nulls()
    d = d.filter(d > 0)
    return int(d.median()) if d.len() else 1
