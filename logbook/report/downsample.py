"""Downsampling for drawing: first, min, max and last point of each step bin.

A million points cannot be drawn one per pixel; averaging them would erase the spikes a
report exists to show. Each bin of the step axis keeps its first, lowest, highest and
last finite point, in step order, so that the drawn line passes through every extreme:
a one-record spike survives at any zoom level.
"""

from __future__ import annotations

import numpy as np
import polars as pl

DEFAULT_BINS = 1200  # about two points per horizontal pixel of a report figure


def minmax_bins(
    steps: np.ndarray, values: np.ndarray, bins: int = DEFAULT_BINS
) -> tuple[np.ndarray, np.ndarray]:
    """The points to draw for ``values`` over ``steps`` (both 1-D, same length).

    Non-finite values are left out (they are marked separately). When there are at most
    ``4 * bins`` finite points they are all returned, in step order.
    """
    steps = np.asarray(steps, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(values) & np.isfinite(steps)
    s, v = steps[ok], values[ok]
    if s.size <= 4 * bins:
        order = np.argsort(s, kind="stable")
        return s[order], v[order]
    lo, hi = float(s.min()), float(s.max())
    width = (hi - lo) / bins if hi > lo else 1.0
    idx = np.minimum(((s - lo) / width).astype(np.int64), bins - 1)
    if np.all(s[1:] >= s[:-1]):  # in step order already, as a trajectory is
        return _sorted_picks(s, v, idx)
    df = pl.DataFrame({"b": idx, "s": s, "v": v, "i": np.arange(s.size)})
    df = df.sort(["b", "s", "i"])
    picks = df.group_by("b").agg(
        pl.col("i").first().alias("first"),
        pl.col("i").sort_by("v", "s").first().alias("low"),
        pl.col("i").sort_by("v", "s").last().alias("high"),
        pl.col("i").last().alias("last"),
    )
    keep = np.unique(
        picks.select(pl.concat_list("first", "low", "high", "last").explode())
        .to_series()
        .to_numpy()
    )
    order = np.lexsort((keep, s[keep]))
    chosen = keep[order]
    return s[chosen], v[chosen]


def _sorted_picks(s: np.ndarray, v: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The picks of :func:`minmax_bins` for steps in order (``idx``: each point's bin),
    without sorting: the first and last point of each bin, its lowest (the first of
    equal ones) and its highest (the last of equal ones)."""
    n = s.size
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    ends = np.r_[starts[1:], n] - 1
    bin_of = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, n]))
    at = np.arange(n)
    lowest, highest = np.minimum.reduceat(v, starts), np.maximum.reduceat(v, starts)
    low = np.minimum.reduceat(np.where(v == lowest[bin_of], at, n), starts)
    high = np.maximum.reduceat(np.where(v == highest[bin_of], at, -1), starts)
    keep = np.unique(np.concatenate([starts, low, high, ends]))
    return s[keep], v[keep]


def plot_frame(run, columns: list[str], traj: pl.DataFrame | None = None) -> pl.DataFrame:
    """The records to draw: the trajectory (lineage 0), then each segment's records that
    a later restart recomputed (lineage 1 + segment), with the step, the segment and those
    of ``columns`` the run has (``traj``: the run's trajectory, when already computed)."""
    cols = ["step", "segment", *dict.fromkeys(c for c in columns if c in run.metrics.columns)]
    traj = (run.trajectory() if traj is None else traj).select(cols)
    rest = run.metrics.filter(pl.col("step").is_not_null()).select(cols)
    gone = rest.join(traj.select("segment", "step"), on=["segment", "step"], how="anti")
    parts = [traj.with_columns(pl.lit(0, pl.Int32).alias("lineage"))]
    if gone.height:
        parts.append(gone.with_columns((pl.col("segment") + 1).cast(pl.Int32).alias("lineage")))
    return pl.concat(parts, how="vertical_relaxed")


class OverviewLines:
    """The downsampled lines of a plot frame (:func:`plot_frame`), each computed once:
    the static and the interactive overview draw the same ones."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame
        self.main = frame.filter(pl.col("lineage") == 0)  # the trajectory
        self.rest = frame.filter(pl.col("lineage") > 0)  # recomputed after a restart
        self._done: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}

    def get(self, column: str, recomputed: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Steps and values of ``column`` on the trajectory (or the recomputed records)."""
        key = (column, recomputed)
        if key not in self._done:
            self._done[key] = lineage_series(self.rest if recomputed else self.main, column)
        return self._done[key]


def lineage_series(
    frame: pl.DataFrame, column: str, bins: int = DEFAULT_BINS
) -> tuple[np.ndarray, np.ndarray]:
    """Downsampled points of ``column`` for each lineage of ``frame`` (a ``lineage`` column
    numbers them), joined with a NaN between lineages so that lines do not connect."""
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for key in sorted(frame.get_column("lineage").unique().to_list()):
        part = frame.filter(pl.col("lineage") == key)
        steps = part.get_column("step").to_numpy()
        x, y = minmax_bins(steps, part.get_column(column).cast(pl.Float64).to_numpy(), bins)
        x, y = broken_at_gaps(x, y, steps)
        if xs:
            xs.append(np.array([np.nan]))
            ys.append(np.array([np.nan]))
        xs.append(x)
        ys.append(y)
    if not xs:
        return np.array([]), np.array([])
    return np.concatenate(xs), np.concatenate(ys)


GAP_FACTOR = 10  # steps absent over this many log intervals are drawn as a gap


def broken_at_gaps(
    x: np.ndarray, y: np.ndarray, steps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``x``, ``y`` (points drawn from records at ``steps``, sorted) with a NaN where the
    log has no record for more than ``GAP_FACTOR`` log intervals: a gap is drawn as a
    gap, not as a straight line across steps nobody measured."""
    if steps.size < 3 or x.size < 2:
        return x, y
    diff = np.diff(steps.astype(np.float64))
    d = diff[np.isfinite(diff) & (diff > 0)]
    if not d.size:
        return x, y
    wide = np.flatnonzero(diff > GAP_FACTOR * float(np.median(d)))
    if not wide.size:
        return x, y
    at = np.searchsorted(x, steps[wide + 1], side="left")
    at = np.unique(at[(at > 0) & (at < x.size)])
    return np.insert(x.astype(np.float64), at, np.nan), np.insert(y, at, np.nan)
