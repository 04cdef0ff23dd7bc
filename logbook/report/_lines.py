"""Lines of training: what the model had seen at a step, on the line a finding lies on.

The line that segment ``k`` continues holds, for each step, the record of the latest
launch at or before ``k`` that reached it (the run's trajectory is the line of its last
segment). Remedies ask a few values on such lines (the loss scale at a checkpoint, the
samples consumed at a step); :class:`Lines` answers them from per-segment arrays with a
binary search, so that a run with many incidents and restarts never re-sorts its
records per question.
"""

from __future__ import annotations

import numpy as np
import polars as pl


class Lines:
    """Per-segment step-sorted arrays of a few columns, nulls forward-filled."""

    def __init__(self, metrics: pl.DataFrame, columns: tuple[str, ...]) -> None:
        cols = [c for c in columns if c in metrics.columns]
        m = metrics.filter(pl.col("step").is_not_null()).select(
            pl.col("segment").fill_null(0), "step", *[pl.col(c).cast(pl.Float64) for c in cols]
        )
        self.columns = set(cols)
        self.parts: dict[int, dict[str, np.ndarray]] = {}
        for (seg,), part in sorted(m.partition_by("segment", as_dict=True).items()):
            part = part.sort("step", maintain_order=True).with_columns(
                [pl.col(c).fill_nan(None).forward_fill() for c in cols]
            )
            arrays = {"step": part.get_column("step").to_numpy()}
            for c in cols:
                v = part.get_column(c).to_numpy(allow_copy=True).astype(np.float64)
                arrays[c] = v
                arrays[f"{c}:cummax"] = np.fmax.accumulate(v) if v.size else v
            self.parts[int(seg)] = arrays

    def _segments(self, segment: int) -> list[int]:
        return [s for s in self.parts if s <= segment]

    def _last_at(self, segment: int, step: int) -> tuple[int, int] | None:
        """(segment, index) of the record at or before ``step`` with the highest step on
        the line of ``segment``; the later segment wins a tie."""
        best: tuple[int, int, int] | None = None
        for s in self._segments(segment):
            steps = self.parts[s]["step"]
            i = int(np.searchsorted(steps, step, side="right")) - 1
            if i >= 0 and (best is None or steps[i] >= best[0]):
                best = (int(steps[i]), s, i)
        return None if best is None else (best[1], best[2])

    def value_at(self, segment: int, column: str, step: int) -> float | None:
        """The last known value of ``column`` at or before ``step`` on the line."""
        if column not in self.columns:
            return None
        hit = self._last_at(segment, step)
        if hit is None:
            return None
        v = self.parts[hit[0]][column][hit[1]]
        return None if np.isnan(v) else float(v)

    def last_step(self, segment: int, step: int) -> int:
        """The step of the line's last record at or before ``step`` (``step`` if none)."""
        hit = self._last_at(segment, step)
        return step if hit is None else int(self.parts[hit[0]]["step"][hit[1]])

    def has_step(self, segment: int, step: int) -> bool:
        """Whether the line has a record at ``step``."""
        for s in self._segments(segment):
            steps = self.parts[s]["step"]
            i = int(np.searchsorted(steps, step, side="left"))
            if i < steps.size and steps[i] == step:
                return True
        return False

    def max_until(self, segment: int, column: str, step: int) -> float | None:
        """The largest value of ``column`` in the records of segments up to ``segment`` at
        or before ``step`` (e.g. the peak learning rate reached so far)."""
        if column not in self.columns:
            return None
        out = np.nan
        for s in self._segments(segment):
            steps = self.parts[s]["step"]
            i = int(np.searchsorted(steps, step, side="right")) - 1
            if i >= 0:
                out = np.fmax(out, self.parts[s][f"{column}:cummax"][i])
        return None if np.isnan(out) else float(out)

    def median(self, segment: int, column: str) -> float | None:
        """Median of ``column`` over the records of segments up to ``segment``."""
        if column not in self.columns:
            return None
        vals = [self.parts[s][column] for s in self._segments(segment)]
        v = np.concatenate(vals) if vals else np.array([])
        v = v[np.isfinite(v)]
        return float(np.median(v)) if v.size else None


def window_line(metrics: pl.DataFrame, segment: int | None, lo: int, hi: int) -> pl.DataFrame:
    """The records of steps ``lo..hi`` on the line of ``segment`` (``None``: the
    trajectory), in step order. Only the window is sorted."""
    m = metrics.filter(pl.col("step").is_between(lo, hi))
    if segment is not None:
        m = m.filter(pl.col("segment") <= segment)
    order = pl.int_range(pl.len()).alias("_order")
    return (
        m.with_columns(order)
        .sort(["segment", "_order"])
        .unique(subset="step", keep="last", maintain_order=True)
        .sort("step")
        .drop("_order")
    )
