"""Sustained multiplicative rises: the core of the drift and throughput detectors.

Per lineage, in log space: the *level* is the mean of the last ``short_records`` values
of the running median of three (causal: it uses no later record; a lone outlier does not
move it); the *baseline* is the mean of the ``baseline_records`` values before those.
A record is *above* when level - baseline reaches log(``min_ratio``) and ``z`` times the
noise of the level (robust deviation from first differences over blocks of 50 records,
divided by sqrt(short_records), times 1.25). An episode
is a run of *elevated* records (rise above a quarter of log(min_ratio) and two noise
deviations) that contains ``min_records`` consecutive *above* records: it starts at its
first elevated record (the onset), fires (``step``) at the record completing the
``min_records`` (what an on-line monitor would have seen), and ends at the last record
whose level is still above the baseline at the onset (the moving baseline catches up
with a long rise; the one at the onset does not). Its magnitude is the highest level
over the baseline at the onset.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from pydantic import Field

from logbook.detectors._arrays import (
    NOISE_BLOCK,
    Rows,
    block_noise,
    lagged_mean,
    lineage_ends,
    run_position,
    runs,
    smooth_level,
)
from logbook.detectors._base import DetectorConfig, capped_exp, finding
from logbook.schema import Finding

MEDIAN_EFFICIENCY = 1.2533  # at most the sd of a median of n Gaussian draws, x sqrt(n)/sigma


class TrendConfig(DetectorConfig):
    """Thresholds of a sustained-rise detector."""

    column: str = Field("act_norm", description="Metric column to watch.")
    short_records: int = Field(5, ge=1, description="Records in the current level.")
    baseline_records: int = Field(
        1000, ge=3, description="Records before the level that make the baseline (a mean)."
    )
    min_history: int = Field(20, ge=2, description="Baseline records needed before firing.")
    min_ratio: float = Field(
        1.25, gt=1, description="Level/baseline ratio that counts (as a precursor at least)."
    )
    warn_ratio: float = Field(
        2.0, gt=1, description="Ratio from which the rise is a warning on its own."
    )
    min_records: int = Field(3, ge=1, description="Consecutive records above min_ratio to fire.")
    z: float = Field(4.0, gt=0, description="Noise deviations of the level the rise must reach.")
    min_noise: float = Field(0.005, gt=0, description="Floor of the noise deviation (log units).")


def trend_episodes(rows: Rows, cfg: TrendConfig, noise: np.ndarray | None = None) -> pl.DataFrame:
    """Episodes of a sustained rise of ``rows.y`` (log values).

    One row per episode: lineage, segment, start, alarm, end, peak_step, ratio,
    baseline (exp), peak level (exp)."""
    if rows.size == 0:
        return pl.DataFrame(schema=EPISODE_SCHEMA)
    a = {"y": rows.y, "lineage": rows.lineage, "step": rows.step}
    a |= {"segment": rows.segment, "report": rows.report}
    k = cfg.short_records
    a["level"] = smooth_level(a["y"], a["lineage"], k)
    a["base"] = lagged_mean(a["y"], a["lineage"], cfg.baseline_records, k, cfg.min_history)
    if noise is None:
        noise = block_noise(a["y"], a["lineage"], NOISE_BLOCK)
    a["sig"] = np.fmax(noise, cfg.min_noise) * (MEDIAN_EFFICIENCY / math.sqrt(k))
    lr = math.log(cfg.min_ratio)
    with np.errstate(invalid="ignore"):
        rise = a["level"] - a["base"]
        above = (rise >= lr) & (rise >= cfg.z * a["sig"])
        elev = (rise > lr / 4) & (rise > 2 * a["sig"])
    alarms = np.flatnonzero(above & (run_position(above, a["lineage"]) == cfg.min_records))
    first, last = runs(elev, a["lineage"])
    if alarms.size == 0 or first.size == 0:
        return pl.DataFrame(schema=EPISODE_SCHEMA)
    j = np.minimum(np.searchsorted(alarms, first), alarms.size - 1)
    fired = alarms[j] <= last
    fired &= alarms[j] >= first
    return _episodes(a, first[fired], last[fired], alarms[j][fired], lr / 4)


def _episodes(
    a: dict[str, np.ndarray], first: np.ndarray, last: np.ndarray, alarm: np.ndarray, lift: float
) -> pl.DataFrame:
    """Each elevated run that fired, extended while the level stays above the baseline
    at its onset (plus ``lift`` and two noise deviations), overlapping ones merged."""
    level = np.nan_to_num(a["level"], nan=-np.inf)
    base, sig, step = a["base"], a["sig"], a["step"]
    his = lineage_ends(a["lineage"], first).tolist()
    rows, end = [], -1
    for i0, i1, ia, hi in zip(first.tolist(), last.tolist(), alarm.tolist(), his, strict=True):
        if i0 <= end:
            continue  # inside the previous, extended episode
        floor = base[i0] + max(lift, 2 * sig[i0])
        below = np.flatnonzero(level[i1 + 1 : hi] <= floor)
        end = i1 + int(below[0]) if below.size else hi - 1
        if not a["report"][ia]:
            continue  # fired on context rows: reported in the trajectory's lineage
        peak = i0 + int(np.argmax(level[i0 : end + 1]))
        rows.append(
            {
                "lineage": int(a["lineage"][i0]),
                "segment": int(a["segment"][i0]),
                "start": int(step[i0]),
                "alarm": int(step[ia]),
                "end": int(step[end]),
                "peak_step": int(step[peak]),
                "baseline": capped_exp(base[i0]),
                "peak": capped_exp(level[peak]),
                "ratio": capped_exp(level[peak] - base[i0]),
            }
        )
    return pl.DataFrame(rows, schema=EPISODE_SCHEMA)


RECOMPUTED = " (in steps later recomputed after a restart)"


def episode_finding(
    kind: str, detector: str, severity: str, r: dict, message: str, evidence: dict
) -> Finding:
    """The finding of one episode row of :func:`trend_episodes` (its alarm, span, ratio
    and segment); ``message`` gets the note on superseded steps when it is one."""
    return finding(
        kind,
        detector,
        severity,
        step=r["alarm"],
        start_step=r["start"],
        end_step=r["end"],
        score=r["ratio"],
        message=message + (RECOMPUTED if r["lineage"] else ""),
        segment=r["segment"],
        evidence=evidence,
    )


EPISODE_SCHEMA = {
    "lineage": pl.Int64,
    "segment": pl.Int64,
    "start": pl.Int64,
    "alarm": pl.Int64,
    "end": pl.Int64,
    "peak_step": pl.Int64,
    "baseline": pl.Float64,
    "peak": pl.Float64,
    "ratio": pl.Float64,
}
