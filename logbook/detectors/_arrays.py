"""Numpy arrays of one metric per lineage, and the rolling statistics on them.

Metrics that multiply (loss, gradient norm, activation norm, step time) are compared in
log space, where a jump of 2x means the same at loss 11 and at loss 2. Statistics are
computed per lineage (rows sorted by lineage): a few O(n) array passes, cheaper than
building polars expression plans over a million rows again and again. Robust noise
scales come from the median absolute first difference (divided by 0.954, its value for
Gaussian noise of unit deviation), which a slow trend or a few outliers do not inflate.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

MAD_DIFF_TO_SIGMA = 1.0 / 0.954  # median |x_t - x_(t-1)| = 0.954 sigma for iid Gaussian noise
NOISE_BLOCK = 50  # records per block of the noise estimates


@dataclass
class Rows:
    """The rows of the analysis frame where a metric has a usable value: ``y`` (its log)
    and, per row, lineage, step, segment, report flag and restart age."""

    y: np.ndarray
    lineage: np.ndarray
    step: np.ndarray
    segment: np.ndarray
    report: np.ndarray
    age: np.ndarray

    @property
    def size(self) -> int:
        return int(self.y.size)


NO_RESTART = 1 << 30  # a restart age where there was no restart (nor a gap)
ROW_COLUMNS = ("lineage", "step", "segment", "report", "restart_age")


def rows_of(frame: pl.DataFrame | dict[str, np.ndarray], y: np.ndarray) -> Rows:
    """Rows of ``frame`` (or of its ``ROW_COLUMNS`` as arrays) where ``y`` (one value per
    frame row) is finite."""
    keep = np.isfinite(y)
    if isinstance(frame, pl.DataFrame):
        frame = {c: frame.get_column(c).to_numpy() for c in ROW_COLUMNS}
    arrays = [frame[c] for c in ROW_COLUMNS]
    if not keep.all():
        y, arrays = y[keep], [a[keep] for a in arrays]
    return Rows(y, *arrays)


def log_values(col: pl.Series, magnitude: bool = False) -> np.ndarray:
    """log of the column where it is finite and > 0 (with ``magnitude``: log |x| where
    it is non-zero); NaN elsewhere, nulls included."""
    x = col.cast(pl.Float64).fill_null(np.nan).to_numpy()
    if magnitude:
        x = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)


def spans(lineage: np.ndarray) -> list[tuple[int, int]]:
    """(first row, one past the last row) of each lineage."""
    if lineage.size == 0:
        return []
    starts = np.flatnonzero(np.concatenate(([True], lineage[1:] != lineage[:-1])))
    ends = np.concatenate((starts[1:], [lineage.size]))
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def lineage_ends(lineage: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, one past the last row of its lineage."""
    bounds = spans(lineage)
    starts = np.array([a for a, _ in bounds], dtype=np.int64)
    ends = np.array([b for _, b in bounds], dtype=np.int64)
    return ends[np.searchsorted(starts, rows, side="right") - 1] if rows.size else rows


def block_noise(y: np.ndarray, lineage: np.ndarray, block: int) -> np.ndarray:
    """Robust noise deviation per row: the median absolute first difference (times
    1/0.954) over the previous block of ``block`` records of its lineage (in the first
    block: over the records before the row; NaN for the first two). One median per block
    is far cheaper than a rolling one, and a scale needs no step-by-step update."""
    out = np.empty(y.size)
    for lo, hi in spans(lineage):
        out[lo:hi] = _block_noise(y[lo:hi], block)
    return out * MAD_DIFF_TO_SIGMA


def _block_noise(y: np.ndarray, block: int) -> np.ndarray:
    if y.size < 2:
        return np.full(y.size, np.nan)
    ad = np.empty_like(y)  # ad[i] = |y[i] - y[i-1]|
    np.subtract(y[1:], y[:-1], out=ad[1:])
    np.abs(ad, out=ad)
    ad[0] = ad[1]
    full = ad.size // block
    # (one median per row of a fixed-width polars array: faster than numpy's)
    meds = [pl.Series(ad[: full * block]).reshape((full, block)).arr.median().to_numpy()]
    if ad.size > full * block:
        meds.append(np.array([np.median(ad[full * block :])]))
    meds = np.concatenate(meds)
    out = np.repeat(np.concatenate(([np.nan], meds[:-1])), block)[: y.size]  # block b-1's
    head = min(block, y.size)  # the first block: the differences before each row
    first = pl.Series(ad[1:head]).rolling_median(block, min_samples=1).to_numpy()
    out[:head] = np.concatenate(([np.nan, np.nan], first))[:head]
    return out


def prev_window_median(
    y: np.ndarray, lineage: np.ndarray, window: int, min_rise: float | np.ndarray
) -> np.ndarray:
    """Median of the previous ``window`` values of ``y`` in the same lineage, at least at
    the rows that are ``min_rise`` or more above the smallest of those values (NaN at
    rows that are not ``min_rise`` above a lower bound of that smallest value: such a row
    cannot be ``min_rise`` above the median either). The bound finds the candidate rows;
    their medians come from a sliding-window view, or, when a third of the rows or more
    are candidates, from one rolling median of every row. ``min_rise`` may be one value
    per row."""
    rise = np.broadcast_to(np.asarray(min_rise, dtype=float), y.shape)
    out = np.full(y.size, np.nan)
    for lo, hi in spans(lineage):
        part = y[lo:hi]
        prev_min = prev_window_floor(part, window)
        with np.errstate(invalid="ignore"):
            cand = np.flatnonzero(part - prev_min >= rise[lo:hi])
        if cand.size * 3 > part.size:
            med = pl.Series(part).rolling_median(window, min_samples=1).shift(1)
            out[lo:hi] = med.fill_null(np.nan).to_numpy()
            continue
        head, full = cand[cand < window], cand[cand >= window]
        if full.size:  # windows of ``window`` values: np.median on a strided view
            windows = np.lib.stride_tricks.sliding_window_view(part, window)[full - window]
            out[lo + full] = np.median(windows, axis=1)
        if head.size:  # the first rows of the lineage: shorter windows
            padded = np.concatenate((np.full(window, np.nan), part[:window]))
            windows = np.lib.stride_tricks.sliding_window_view(padded, window)[head]
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the first row: no values
                out[lo + head] = np.nanmedian(windows, axis=1)
    return out


def prev_window_floor(x: np.ndarray, window: int) -> np.ndarray:
    """A lower bound of the minimum of the previous ``window`` values of ``x`` (NaN for
    the first row), in one pass: the smaller minimum of the two blocks of ``window``
    rows (aligned at the start) that hold the window, which the window never leaves."""
    n = x.size
    out = np.full(n, np.nan)
    if n < 2:
        return out
    blocks = -(-n // window)
    padded = np.full(blocks * window, np.inf)
    padded[:n] = x
    block_min = padded.reshape(blocks, window).min(axis=1)
    pair = block_min.copy()  # blocks b - 1 and b: the window of a row whose last value is in b
    np.minimum(pair[1:], block_min[:-1], out=pair[1:])
    out[1:] = np.repeat(pair, window)[: n - 1]
    return out


def prev_median(y: np.ndarray, i: int, lo: int, window: int) -> float:
    """Median of the ``window`` values before row ``i`` (not before row ``lo``)."""
    return float(np.median(y[max(lo, i - window) : i])) if i > lo else float("nan")


def _rolling_mean(x: np.ndarray, k: int) -> np.ndarray:
    """Mean of the last ``k`` values (NaN for the first k-1 rows)."""
    out = np.full(x.size, np.nan)
    if x.size >= k:
        c = np.cumsum(x)
        out[k - 1] = c[k - 1]
        np.subtract(c[k:], c[:-k], out=out[k:])
        out[k - 1 :] /= k
    return out


def _median3(x: np.ndarray) -> np.ndarray:
    """Running median of three (the first rows repeat the first value)."""
    if x.size < 3:
        b = np.concatenate((x[:1], x[:-1]))
        c = np.concatenate((x[:1], x[:1], x[:-2]))[: x.size]
        return np.maximum(np.minimum(x, b), np.minimum(np.maximum(x, b), c))
    out = np.empty_like(x)
    out[:2] = _median3(x[:2])
    a, b, c = x[2:], x[1:-1], x[:-2]  # each row, the one before, the one before that
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    np.minimum(hi, c, out=hi)
    np.maximum(lo, hi, out=out[2:])
    return out


def smooth_level(y: np.ndarray, lineage: np.ndarray, k: int) -> np.ndarray:
    """Mean of the last ``k`` values of the running median of three (a lone outlier does
    not move it), per lineage; NaN for its first ``k - 1`` rows."""
    out = np.full(y.size, np.nan)
    for lo, hi in spans(lineage):
        out[lo:hi] = _rolling_mean(_median3(y[lo:hi]), k)
    return out


def lagged_mean(
    y: np.ndarray, lineage: np.ndarray, window: int, lag: int, min_history: int
) -> np.ndarray:
    """Mean of the ``window`` values ending ``lag`` rows before each row, per lineage;
    NaN until ``min_history`` values are in that window."""
    out = np.full(y.size, np.nan)
    for lo, hi in spans(lineage):
        n = hi - lo
        c = np.cumsum(np.concatenate(([0.0], y[lo:hi])))
        # row i averages part[e - m : e] with e = i - lag + 1 and m = min(e, window)
        first = lag - 1 + min_history  # first row with min_history values
        full = lag - 1 + window  # first row with a full window
        e = np.arange(max(first, 0), min(full, n)) - lag + 1
        out[lo + e + lag - 1] = c[e] / e
        if full < n:
            out[lo + full : hi] = (c[window : n - lag + 1] - c[: n - lag + 1 - window]) / window
    return out


def run_position(flag: np.ndarray, lineage: np.ndarray) -> np.ndarray:
    """1-based position of each True row in its run of consecutive True rows (0 where
    False); runs do not cross lineages."""
    same = np.concatenate(([False], lineage[1:] == lineage[:-1]))
    prev = np.concatenate(([False], flag[:-1])) & same
    idx = np.arange(flag.size)
    first = np.maximum.accumulate(np.where(flag & ~prev, idx, 0))
    return np.where(flag, idx - first + 1, 0)


def runs(flag: np.ndarray, lineage: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row, last row) of each run of consecutive True rows within a lineage."""
    same = np.concatenate(([False], lineage[1:] == lineage[:-1]))
    prev = np.concatenate(([False], flag[:-1])) & same
    nxt = np.concatenate((flag[1:], [False])) & np.concatenate((same[1:], [False]))
    return np.flatnonzero(flag & ~prev), np.flatnonzero(flag & ~nxt)


GAP_FACTOR = 20  # a step gap this many times the lineage's usual one is a gap in the log


def gap_age(step: np.ndarray, lineage: np.ndarray) -> np.ndarray:
    """Records since the last gap in the log (an excerpt's ``...``, a lost piece: steps
    jumping ``GAP_FACTOR`` times the usual interval of the lineage), ``NO_RESTART`` where
    none came before. A record after a gap is judged as one after a restart: the level
    it comes back at is not a spike over the records before the gap."""
    n = step.size
    age = np.full(n, NO_RESTART, dtype=np.int64)
    if n < 3:
        return age
    d = np.diff(step.astype(np.float64))
    same = lineage[1:] == lineage[:-1]
    usual = float(np.median(d[same & (d > 0)])) if (same & (d > 0)).any() else 0.0
    if usual <= 0:
        return age
    gap = np.r_[False, same & (d > GAP_FACTOR * usual)]
    if not gap.any():
        return age
    idx = np.arange(n)
    last = np.maximum.accumulate(np.where(gap, idx, -1))
    new_lineage = np.r_[True, ~same]
    start = np.maximum.accumulate(np.where(new_lineage, idx, -1))
    seen = (last >= 0) & (last >= start)
    age[seen] = idx[seen] - last[seen]
    return age


QUANTA = 2  # a rise of at most this many units of the values' resolution is rounding
_SAMPLE = 20_000


def rounding_rise(raw: np.ndarray) -> float:
    """The largest rise that is only rounding: ``QUANTA`` units of the unit the values
    are printed in, where they are rounded to one (``0.0001``, ``0.0002``: a loss at 4
    decimals near zero), found as the least gap between two distinct values (of a
    sample) when nearly every value is a whole number of it; else 0."""
    v = raw[np.isfinite(raw)][:: max(1, raw.size // _SAMPLE)]
    distinct = np.unique(v)
    if distinct.size < 2:
        return 0.0
    q = float(np.diff(distinct).min())
    if q <= 0 or not np.isfinite(q):
        return 0.0
    units = v / q
    whole = np.abs(units - np.round(units)) <= 1e-3 * np.maximum(1.0, np.abs(units) * 1e-6)
    return QUANTA * q * (1 + 1e-6) if whole.mean() >= 0.95 else 0.0
