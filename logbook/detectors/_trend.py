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
    spans,
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


def trend_episodes(
    rows: Rows,
    cfg: TrendConfig,
    noise: np.ndarray | None = None,
    scratch_step: int = -1,
    loss_settled: int | None = None,
) -> pl.DataFrame:
    """Episodes of a sustained rise of ``rows.y`` (log values).

    ``scratch_step``: a lineage whose first row is at this step or before starts from
    scratch, and its records up to the end of their initial growth (see
    :func:`settled`; ``loss_settled``: the step its loss stopped falling fast) neither
    fire nor count in a baseline.

    One row per episode: lineage, segment, start, base_from (the first step of the
    baseline at the onset), alarm, end, peak_step, ratio,
    baseline (exp), peak level (exp)."""
    if rows.size == 0:
        return pl.DataFrame(schema=EPISODE_SCHEMA)
    a = {"y": rows.y, "lineage": rows.lineage, "step": rows.step}
    a |= {"segment": rows.segment, "report": rows.report}
    k = cfg.short_records
    a["level"] = smooth_level(a["y"], a["lineage"], k)
    start = settled(
        a["level"], a["lineage"], a["step"], scratch_step, k, cfg.min_ratio, loss_settled
    )
    # (records of the initial growth as lineages of their own: no baseline spans both)
    parts = np.where(start, a["lineage"], -1 - a["lineage"])
    a["base"] = lagged_mean(a["y"], parts, cfg.baseline_records, k, cfg.min_history)
    idx = np.arange(parts.size)
    head = np.maximum.accumulate(np.where(np.r_[True, parts[1:] != parts[:-1]], idx, 0))
    a["base_from"] = np.maximum(head, idx - k - cfg.baseline_records)  # its first record
    a["base"][~start] = np.nan
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


def settled(
    level: np.ndarray,
    lineage: np.ndarray,
    step: np.ndarray,
    scratch_step: int,
    k: int,
    min_ratio: float,
    loss_settled: int | None = None,
) -> np.ndarray:
    """True from the record where a run trained from scratch has ended its initial
    growth (a norm or logit rising from its initialisation scale while the model first
    learns): the first, from step ``loss_settled`` on (when the loss stopped falling
    fast, see :func:`loss_settled_step`), at which the level rose less than half of
    ``min_ratio`` over the last ``2 k`` records. Only that record's past decides it
    (what an on-line monitor would know then). All True for a lineage that starts later
    than ``scratch_step`` (a resumed run, or a metric first logged later on), and for
    one whose level did not rise by half of ``min_ratio`` up to that record."""
    out = np.ones(level.size, dtype=bool)
    half = math.log(min_ratio) / 2
    for lo, hi in spans(lineage):
        if step[lo] > scratch_step:
            continue
        lv = level[lo:hi]
        rise = np.full(lv.size, np.nan)
        if lv.size > 2 * k:
            rise[2 * k :] = lv[2 * k :] - lv[: -2 * k]
        with np.errstate(invalid="ignore"):
            calm = rise < half
        if loss_settled is not None:
            calm &= step[lo:hi] >= loss_settled
        at = np.flatnonzero(calm)
        first = int(at[0]) if at.size else lv.size
        seen = np.flatnonzero(np.isfinite(lv[: first + 1]))
        # only a rise is left out: a metric that fell meanwhile (the gradient norm
        # from its first steps) keeps its whole history
        grew = seen.size > 0 and (lv[min(first, lv.size - 1)] - lv[seen[0]] > half or not at.size)
        if grew:
            out[lo : lo + first] = False
    return out


FAST_FALL = 0.05  # log-loss fall over LOSS_SPAN records that is still first learning
LOSS_SPAN, LOSS_MEAN = 20, 10


def loss_settled_step(loss: Rows, scratch_step: int) -> int | None:
    """The first step at which a run trained from scratch no longer learns fast: the
    mean of the last ``LOSS_MEAN`` log losses is less than ``FAST_FALL`` below that of
    ``LOSS_SPAN`` records before. None: the run is not from scratch, or no loss."""
    if loss.size == 0 or loss.step[0] > scratch_step:
        return None
    lo, hi = spans(loss.lineage)[0]
    y = loss.y[lo:hi]
    if y.size < LOSS_SPAN + LOSS_MEAN:
        return None
    c = np.cumsum(np.concatenate(([0.0], y)))
    mean = (c[LOSS_MEAN:] - c[:-LOSS_MEAN]) / LOSS_MEAN  # mean[j]: rows j .. j + 9
    fall = mean[:-LOSS_SPAN] - mean[LOSS_SPAN:]
    at = np.flatnonzero(fall < FAST_FALL)
    if not at.size:
        return int(loss.step[hi - 1]) + 1  # still learning fast at its end
    return int(loss.step[lo + int(at[0]) + LOSS_SPAN + LOSS_MEAN - 1])


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
                "base_from": int(step[a["base_from"][i0]]),
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
    "base_from": pl.Int64,
    "alarm": pl.Int64,
    "end": pl.Int64,
    "peak_step": pl.Int64,
    "baseline": pl.Float64,
    "peak": pl.Float64,
    "ratio": pl.Float64,
}
