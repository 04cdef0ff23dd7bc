"""Launches that only a metrics table's own counters show: two launches of one run
writing to one file (a ``metrics.json`` or ``progress.csv`` appended to), with no line
between them that says so.

* **ETA**: a job that finished and was launched again from its last checkpoint with a
  longer schedule (detectron2's ``metrics.json``): ``eta_seconds`` falls to 0 at the
  first job's last iteration and jumps back up at the next record while the iteration
  goes on, past the first logging interval (where a job from scratch logs its first).
* **Elapsed time or iterations since the launch**: stable-baselines3's
  ``time/time_elapsed`` and ``time/iterations`` count from the launch; a ``learn(...,
  reset_num_timesteps=False)`` call after a reload starts them over while the step
  (``time/total_timesteps``) goes on.

Each is a ``restart`` at the last record before the new launch.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from logbook.schema import Restart, Source

ETA = "eta_seconds"
DONE_S = 1.0  # an ETA of at most this: the job's last iteration
AGAIN_S = 60.0  # an ETA of at least this on the next record: another job's schedule
# a counter of the launch's own (snake_case column names)
_SINCE_LAUNCH = re.compile(r"(?:^|_)(?:time_elapsed|elapsed_time|iterations)$")
RESET = 0.1  # a counter falling below this share of its value before starts over
GROWS = 0.9  # share of the rows a counter of the launch grows at


def relaunches(metrics: pl.DataFrame, name: str) -> list[Restart]:
    """The launches the ETA or a counter of the launch shows (see the module)."""
    if "step" not in metrics.columns or "line" not in metrics.columns or metrics.height < 2:
        return []
    step = _floats(metrics, "step")
    line = metrics.get_column("line").to_numpy()
    found: dict[int, str] = {}
    if ETA in metrics.columns:
        found.update(_eta(step, _floats(metrics, ETA)))
    for col in metrics.columns:
        if _SINCE_LAUNCH.search(col):
            for i, why in _started_over(step, _floats(metrics, col), col).items():
                found.setdefault(i, why)
    return [
        Restart(
            resume_step=int(step[i]),
            last_step_before=int(step[i]),
            source=Source(file=name, line=int(line[i])),
            text=why,
        )
        for i, why in sorted(found.items())
    ]


def _floats(metrics: pl.DataFrame, col: str) -> np.ndarray:
    return metrics.get_column(col).cast(pl.Float64, strict=False).fill_null(np.nan).to_numpy()


def _eta(step: np.ndarray, eta: np.ndarray) -> dict[int, str]:
    diffs = np.diff(step)
    forward = diffs[np.isfinite(diffs) & (diffs > 0)]
    if not forward.size:
        return {}
    period = float(np.median(forward))
    with np.errstate(invalid="ignore"):
        hit = (eta[:-1] <= DONE_S) & (eta[1:] >= AGAIN_S) & (step[1:] > step[:-1])
        hit &= step[1:] >= 2 * period
    return {
        int(i): (
            f"the ETA fell to {eta[i]:g} s at step {int(step[i])} (the job's last) and is "
            f"{eta[i + 1]:g} s at step {int(step[i + 1])}: another launch went on"
        )
        for i in np.flatnonzero(hit)
    }


def _started_over(step: np.ndarray, counter: np.ndarray, col: str) -> dict[int, str]:
    d = np.diff(counter)
    with np.errstate(invalid="ignore"):
        hit = (counter[1:] < RESET * counter[:-1]) & (counter[:-1] > 0) & (step[1:] > step[:-1])
    ok = np.isfinite(d) & ~hit  # (between the launches, the counter grows)
    if not hit.any() or ok.sum() < 3 or float((d[ok] > 0).mean()) < GROWS:
        return {}
    return {
        int(i): (
            f"{col} starts over ({counter[i]:g} -> {counter[i + 1]:g}) while the step goes on "
            f"({int(step[i])} -> {int(step[i + 1])}): another launch"
        )
        for i in np.flatnonzero(hit)
    }
