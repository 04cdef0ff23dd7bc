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

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from logbook.detectors._arrays import (
    NO_RESTART,
    ROW_COLUMNS,
    Rows,
    block_noise,
    log_values,
    rounding_rise,
    rows_of,
)
from logbook.run import Run
from logbook.schema import EventBase

CONTEXT_RECORDS = 256


@dataclass
class Context:
    """A run prepared for detection. The analysis frame's columns are gathered from the
    run's metrics when a detector first asks for them (:meth:`column`): most detectors
    read a few of them, and a million-row copy of every column would cost more than
    all the detectors' work on the ones they read."""

    run: Run
    source: pl.DataFrame  # the metrics whose rows make the frame (all have a step)
    take: np.ndarray | None  # their rows in frame order (None: all, in order)
    core: pl.DataFrame  # ``lineage``, ``report``, ``restart_age`` in frame order
    interval: int = 1  # median step distance between consecutive records
    events: list[EventBase] = field(default_factory=list)
    _cols: dict[str, pl.Series] = field(default_factory=dict, repr=False)
    _rows: dict[tuple[str, bool], Rows] = field(default_factory=dict, repr=False)
    _has: dict[str, bool] = field(default_factory=dict, repr=False)
    _base: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _noise: dict[tuple[str, bool, int], np.ndarray] = field(default_factory=dict, repr=False)
    _rounding: dict[str, float] = field(default_factory=dict, repr=False)
    _locks: dict[object, threading.Lock] = field(default_factory=dict, repr=False)

    def _once(self, cache: dict, key: object, make: Callable[[], Any]) -> Any:
        """``cache[key]``, made by ``make`` once: detectors run on several threads, and
        one that needs what another is making waits for it rather than making it too."""
        if key not in cache:
            with self._locks.setdefault((id(cache), key), threading.Lock()):
                if key not in cache:
                    cache[key] = make()
        return cache[key]

    @property
    def height(self) -> int:
        return self.core.height

    @property
    def columns(self) -> list[str]:
        own = self.core.columns
        return [*(c for c in self.source.columns if c not in own), *own]

    def column(self, name: str) -> pl.Series:
        """One column of the analysis frame (gathered once; ``ColumnNotFoundError``
        for a column the run does not have)."""

        def make() -> pl.Series:
            if name in self.core.columns:
                return self.core.get_column(name)
            col = self.source.get_column(name)
            return col if self.take is None else col.gather(self.take)

        return self._once(self._cols, name, make)

    def select(self, names: list[str]) -> pl.DataFrame:
        """The analysis frame's columns ``names``."""
        return pl.DataFrame([self.column(n) for n in names])

    @property
    def frame(self) -> pl.DataFrame:
        """The whole analysis frame (every column)."""
        return self.select(self.columns)

    def noise(self, column: str, magnitude: bool, block: int) -> np.ndarray:
        """``block_noise`` of ``rows(column, magnitude)`` (cached)."""

        def make() -> np.ndarray:
            rows = self.rows(column, magnitude)
            return block_noise(rows.y, rows.lineage, block)

        return self._once(self._noise, (column, magnitude, block), make)

    def rows(self, column: str, magnitude: bool = False) -> Rows:
        """The rows where ``column`` has a usable value, ``y`` its log (cached: several
        detectors read the same metric)."""
        return self._once(
            self._rows,
            (column, magnitude),
            lambda: self.rows_from(log_values(self.column(column), magnitude)),
        )

    def rows_from(self, y: np.ndarray) -> Rows:
        """The rows where ``y`` (one value per frame row) is finite."""
        base = {
            c: self._once(self._base, c, lambda c=c: self.column(c).to_numpy()) for c in ROW_COLUMNS
        }
        return rows_of(base, y)

    def rounding(self, column: str) -> float:
        """``rounding_rise`` of ``column``'s finite values (cached): a rise no larger is
        the print's rounding, not a spike."""

        def make() -> float:
            values = self.column(column).cast(pl.Float64, strict=False).to_numpy()
            return rounding_rise(values)

        return self._once(self._rounding, column, make)

    def signed(self, column: str) -> bool:
        """Whether ``column`` takes negative values: a signed objective (a GRPO or PPO
        loss, a negative log-likelihood bound), whose ratios mean nothing."""
        if column not in self.columns:
            return False
        low = self.column(column).cast(pl.Float64, strict=False).fill_nan(None).min()
        return low is not None and float(low) < 0  # type: ignore[arg-type]

    def has(self, column: str) -> bool:
        """Whether the frame has the column with at least one finite or non-null value."""
        if column not in self._has:
            if column not in self.columns:
                self._has[column] = False
            else:
                col = self.column(column)
                ok = col.is_finite().any() if col.dtype.is_float() else col.is_not_null().any()
                self._has[column] = bool(ok)
        return self._has[column]

    @property
    def lineages(self) -> int:
        return int(self.column("lineage").max() or 0) + 1 if self.height else 0


def build_context(run: Run) -> Context:
    """The analysis frame of a run (see the module docstring)."""
    if run.metrics.get_column("segment").null_count():  # a run built without segments
        filled = run.metrics.with_columns(pl.col("segment").fill_null(0))
        run = Run(metrics=filled, events=run.events, meta=run.meta)
    metrics = run.metrics
    if metrics.get_column("step").null_count():
        metrics = metrics.filter(pl.col("step").is_not_null())
    traj, superseded = trajectory_rows(metrics)
    step, seg = metrics.get_column("step").to_numpy(), metrics.get_column("segment").to_numpy()
    # the frame's rows: the trajectory, then each superseded segment after the
    # trajectory records before it (its columns are gathered when read: Context.column)
    take, lineage, report = [traj], [np.zeros(traj.size, np.int32)], [np.ones(traj.size, bool)]
    tsteps = step[traj]
    sup_seg = seg[superseded]
    for k, s in enumerate(pl.Series(sup_seg).unique(maintain_order=True).to_list()):
        own = superseded[sup_seg == s]
        own = own[np.argsort(step[own], kind="stable")]
        cut = int(np.searchsorted(tsteps, step[own[0]], side="left"))
        before = traj[max(0, cut - CONTEXT_RECORDS) : cut]
        take.append(np.concatenate((before, own)))
        lineage.append(np.full(before.size + own.size, k + 1, np.int32))
        report.append(np.concatenate((np.zeros(before.size, bool), np.ones(own.size, bool))))
    rows = np.concatenate(take)
    identity = rows.size == metrics.height and bool(np.all(rows[1:] > rows[:-1]))
    core = pl.DataFrame(
        {
            "lineage": pl.Series(np.concatenate(lineage), dtype=pl.Int32),
            "report": pl.Series(np.concatenate(report), dtype=pl.Boolean),
            "segment": seg[rows],
        }
    )
    core = _restart_age(core).drop("segment")
    return Context(
        run=run,
        source=metrics.rechunk(),  # (no copy when it is one chunk already)
        take=None if identity else rows,
        core=core,
        interval=_interval(step[traj]),
        events=list(run.events),
    )


def trajectory_rows(metrics: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers of (the trajectory, the superseded records) of a metrics frame whose
    rows all have a step.

    The trajectory keeps, for each step, the record of the last segment that reached it,
    in step order (as ``Run.trajectory``); the superseded records are the others, in
    their order."""
    step = metrics.get_column("step").to_numpy()
    every = np.arange(step.size)
    if step.size < 2 or bool(np.all(step[1:] > step[:-1])):
        return every, every[:0]
    seg = metrics.get_column("segment").to_numpy()
    if not bool(np.all(seg[1:] >= seg[:-1])):  # rows not in launch order: the general way
        numbered = metrics.select("step", "segment").with_row_index("_row")
        traj = Run(metrics=numbered).trajectory().get_column("_row").to_numpy().astype(np.int64)
        keep = np.ones(step.size, dtype=bool)
        keep[traj] = False
        return traj, every[keep]
    # a record can be overwritten only if a later record has a step as small: few rows,
    # found in O(n); only the rows sharing their steps are sorted
    later_min = np.r_[np.minimum.accumulate(step[::-1])[::-1][1:], np.iinfo(np.int64).max]
    cand = np.flatnonzero(later_min <= step)
    # (a binary search in the few shared steps, not a lookup table over the step range)
    shared = np.sort(step[cand])
    if not shared.size:
        return every, every[:0]
    at = np.minimum(np.searchsorted(shared, step), shared.size - 1)
    rel = np.flatnonzero(shared[at] == step)
    order = np.lexsort((rel, step[rel]))  # by step, then row (= launch) order
    ordered = step[rel][order]
    drop = np.sort(rel[order[np.r_[ordered[1:] == ordered[:-1], False]]])
    keep = np.ones(step.size, dtype=bool)
    keep[drop] = False
    traj = every[keep]
    tsteps = step[traj]
    if not bool(np.all(tsteps[1:] > tsteps[:-1])):  # old records between re-logged ones
        traj = traj[np.argsort(tsteps, kind="stable")]
    return traj, drop


def _restart_age(frame: pl.DataFrame) -> pl.DataFrame:
    """Records since the last segment boundary of the lineage (``NO_RESTART``: none)."""
    n = frame.height
    if n == 0:
        return frame.with_columns(pl.lit(None, pl.Int64).alias("restart_age"))
    seg = frame.get_column("segment").to_numpy()
    lineage = frame.get_column("lineage").to_numpy()
    new_lineage = np.r_[True, lineage[1:] != lineage[:-1]]
    boundary = np.r_[False, seg[1:] != seg[:-1]] & ~new_lineage
    idx = np.arange(n)
    # the last boundary or lineage start at or before each row; an age where it is a
    # boundary
    last = np.maximum.accumulate(np.where(boundary | new_lineage, idx, 0))
    age = np.where(boundary[last], idx - last, NO_RESTART)
    return frame.with_columns(pl.Series("restart_age", age, pl.Int64))


def _interval(steps: np.ndarray) -> int:
    """Median step distance between consecutive records of the trajectory."""
    d = np.diff(steps)
    d = d[d > 0]
    return int(np.median(d)) if d.size else 1
