"""The spike detector shared by ``loss_spike`` and ``grad_norm_spike``.

Per lineage, in log space: baseline = median of the previous ``window`` values, noise =
robust deviation from first differences (between ``min_noise`` and ``max_noise``). A
record *triggers* when it is at least ``min_ratio`` times the baseline and ``z`` noise
deviations above it (``z`` times ``restart_z_factor`` in the first ``restart_grace``
records after a restart); with fewer than ``min_history`` records before it, when it is
``single_record_ratio`` times their median. The episode around a trigger is then
measured against the baseline frozen at its onset:

- start: the first of the consecutive records before the trigger that are more than
  ``onset_z`` deviations above the baseline;
- end (recovery): the first record after the trigger back within ``onset_z``
  deviations, or within ``recover_frac`` of the excursion so far; none: not recovered;
- peak: the highest record in between; magnitude = peak / baseline.

A lone elevated record (fewer than ``min_records`` elevated records in the episode) is
kept only when its ratio reaches ``single_record_ratio``, or (where the detector sets
``lone_z``) ``lone_min_ratio`` at ``lone_z`` deviations: heavy-tailed noise makes single
outliers, while real spikes last several records unless the log interval is coarse. A
rise that starts at the first record after a restart and never comes back is a new level
set by the relaunch (a new loss scale, data or config), not a spike.

The loop below runs over triggers (a handful per run), never over rows.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from logbook.detectors._arrays import (
    NOISE_BLOCK,
    Rows,
    gap_age,
    prev_median,
    prev_window_median,
    spans,
)
from logbook.detectors._base import DetectorConfig, capped_exp, finding, fmt
from logbook.detectors._frame import Context
from logbook.schema import Finding


class SpikeConfig(DetectorConfig):
    """Thresholds of a spike detector (log-space, robust)."""

    column: str = Field("loss", description="Metric column to watch.")
    window: int = Field(50, ge=3, description="Records in the rolling baseline window.")
    min_history: int = Field(
        3,
        ge=2,
        description="Records of history the noise-based rule needs (before: only a jump "
        "of single_record_ratio counts).",
    )
    z: float = Field(6.0, gt=0, description="Robust deviations above the baseline to trigger.")
    min_ratio: float = Field(1.25, gt=1, description="Smallest value/baseline ratio to trigger.")
    single_record_ratio: float = Field(
        2.0, gt=1, description="Ratio a spike of a single elevated record must reach."
    )
    min_records: int = Field(
        2, ge=1, description="Elevated records that make a spike without the single-record bar."
    )
    lone_z: float | None = Field(
        None,
        gt=0,
        description="Deviations that make a single elevated record a spike below "
        "single_record_ratio (with at least lone_min_ratio); none: only that ratio does.",
    )
    lone_min_ratio: float = Field(
        1.3, gt=1, description="Smallest ratio of a single elevated record kept by lone_z."
    )
    recent_records: int | None = Field(
        None,
        ge=2,
        description="Baseline: the lower of the window's median and the median of this many "
        "last records (a falling loss); none: the window's median.",
    )
    early_ratio: float | None = Field(
        None,
        gt=1,
        description="In the first min_history records, a rise of this ratio that one of the "
        "next two records holds is a spike (the loss should be falling then); none: only a "
        "jump of single_record_ratio is.",
    )
    min_noise: float = Field(
        0.01, gt=0, description="Floor of the noise deviation, in log units (0.01 = 1%)."
    )
    max_noise: float = Field(
        0.1,
        gt=0,
        description="Ceiling of the noise deviation: a larger spread is a trend, not noise "
        "(unless a series of 30 records or more is that noisy throughout: its median noise).",
    )
    onset_z: float = Field(
        4.0, gt=0, description="Deviations above the baseline that count as elevated."
    )
    recover_frac: float = Field(
        0.2, ge=0, lt=1, description="Recovered when back within this fraction of the rise."
    )
    critical_ratio: float = Field(
        2.0, gt=1, description="Peak/baseline ratio from which the spike is critical."
    )
    restart_grace: int = Field(
        3, ge=0, description="Records after a restart that need a higher bar to trigger."
    )
    restart_z_factor: float = Field(2.0, ge=1, description="z multiplier in the restart grace.")


def detect_spikes(ctx: Context, cfg: SpikeConfig, kind: str, detector: str) -> list[Finding]:
    """Spike episodes of ``cfg.column`` in every lineage of the context."""
    if not ctx.has(cfg.column) or ctx.signed(cfg.column):
        return []  # (a signed metric's ratios mean nothing: its spikes are not judged)
    rows = ctx.rows(cfg.column)
    if rows.size == 0:
        return []
    noise = ctx.noise(cfg.column, False, NOISE_BLOCK)
    a = _arrays(rows, noise, cfg)
    unit = ctx.rounding(cfg.column)
    return [_to_finding(a, ep, cfg, kind, detector) for ep in _episodes(a, cfg, unit)]


def _arrays(rows: Rows, noise: np.ndarray, cfg: SpikeConfig) -> dict[str, np.ndarray]:
    a = {
        "y": rows.y,
        "step": rows.step,
        "segment": rows.segment,
        "lineage": rows.lineage,
        "report": rows.report,
        "age": np.minimum(rows.age, gap_age(rows.step, rows.lineage)),
    }
    a["noise"] = np.clip(
        np.nan_to_num(noise, nan=cfg.min_noise), cfg.min_noise, _ceiling(noise, cfg)
    )
    bounds = spans(rows.lineage)
    a["starts"] = np.array([lo for lo, _ in bounds], dtype=np.int64)
    a["ends"] = np.array([hi for _, hi in bounds], dtype=np.int64)
    # the least rise over the baseline that can trigger; the baseline is NaN where the
    # row cannot reach it (and at the first record). ``cold`` rows (the first
    # ``min_history`` of a lineage: short history) use the strict rule.
    need = np.maximum(math.log(cfg.min_ratio), cfg.z * a["noise"])
    cold = np.zeros(rows.size, dtype=bool)
    first_rise = min(cfg.early_ratio or cfg.single_record_ratio, cfg.single_record_ratio)
    for lo, hi in bounds:
        cold[lo : min(hi, lo + cfg.min_history)] = True
        need[lo : min(hi, lo + cfg.min_history)] = math.log(first_rise)
    a["cold"] = cold
    a["base"] = prev_window_median(rows.y, rows.lineage, cfg.window, need)
    if cfg.recent_records is not None:
        # while the loss falls (the warm-up descent, a decay) the window's median lags
        # above its level: the median of the last few records is the baseline then
        recent = prev_window_median(rows.y, rows.lineage, cfg.recent_records, need)
        a["base"] = np.fmin(a["base"], recent)
    return a


NOISY_RECORDS = 30  # records a series needs to be judged by its own spread


def _ceiling(noise: np.ndarray, cfg: SpikeConfig) -> float:
    """The noise ceiling: ``max_noise`` (a wider local spread is a trend), unless the
    series is that noisy throughout (the per-batch loss of a small batch: detection,
    GANs), its median noise then: it is judged by its own spread. Not a short excerpt
    (fewer than ``NOISY_RECORDS``): its spread may be the incident's own."""
    finite = noise[np.isfinite(noise)]
    if finite.size < NOISY_RECORDS:
        return cfg.max_noise
    return max(cfg.max_noise, float(np.median(finite)))


def _episodes(a: dict[str, np.ndarray], cfg: SpikeConfig, unit: float = 0.0) -> list[dict]:
    y, base, noise = a["y"], a["base"], a["noise"]
    # only rows with a baseline can trigger (see _arrays): the tests run on those alone
    cand = np.flatnonzero(np.isfinite(base) & a["report"])
    rise = y[cand] - base[cand]
    zf = np.where(a["age"][cand] < cfg.restart_grace, cfg.restart_z_factor, 1.0)
    cold = a["cold"][cand]
    warm = ~cold & (rise >= math.log(cfg.min_ratio)) & (rise >= cfg.z * zf * noise[cand])
    # too little history for a noise scale: a jump of single_record_ratio, or a rise of
    # early_ratio that the next record holds (early in training the loss falls)
    jump = cold & (rise >= math.log(cfg.single_record_ratio))
    if cfg.early_ratio is not None:
        # held: one of the next two records is as high (a rise that dips and climbs on is
        # one episode: 11.7 -> 15.6 -> 14.1 -> 28.4)
        held = np.zeros(cand.size, dtype=bool)
        for k in (1, 2):
            nxt = np.minimum(cand + k, y.size - 1)
            ok = (nxt > cand) & (a["lineage"][nxt] == a["lineage"][cand])
            held |= ok & (y[nxt] - base[cand] >= math.log(cfg.early_ratio))
        jump |= cold & (rise >= math.log(cfg.early_ratio)) & held
    trig = cand[warm | jump]
    if unit > 0:  # a rise of a unit or two of the print's last digit is rounding
        trig = trig[np.exp(y[trig]) - np.exp(base[trig]) > unit]
    which = np.searchsorted(a["starts"], trig, side="right") - 1
    los, his = a["starts"][which], a["ends"][which]
    episodes: list[dict] = []
    free = -1
    for t, lo, hi in zip(trig.tolist(), los.tolist(), his.tolist(), strict=True):
        if t < free:
            continue
        ep = _measure(y, base, noise, t, lo, hi, cfg)
        free = _rearm(y, ep, cfg, hi) if ep["recovered"] else hi
        if ep["elevated"] < cfg.min_records and not _lone_spike(ep, a, cfg):
            free = t + 1
            continue
        if a["age"][ep["start"]] == 0 and not ep["recovered"]:
            continue  # a new level set by the relaunch (loss scale, data, config)
        episodes.append(ep)
    return episodes


def _lone_spike(ep: dict, a: dict[str, np.ndarray], cfg: SpikeConfig) -> bool:
    """Whether an episode of one elevated record is a spike: a jump of
    ``single_record_ratio``, or (with a noise scale to judge it by) one of
    ``lone_min_ratio`` that stands ``lone_z`` deviations above the baseline."""
    if ep["ratio"] >= cfg.single_record_ratio:
        return True
    if cfg.lone_z is None or a["cold"][ep["trigger"]]:
        return False
    return ep["ratio"] >= cfg.lone_min_ratio and ep["z"] >= cfg.lone_z


def _rearm(y: np.ndarray, ep: dict, cfg: SpikeConfig, hi: int) -> int:
    """Where a new spike may start: once the loss is fully back (within ``onset_z``
    deviations of the episode's baseline), or ``window`` records after the recovery
    (the rolling baseline has absorbed a new level by then). A long tail is not a
    second spike."""
    e = ep["end"]
    stop = min(hi, e + cfg.window)
    back = np.flatnonzero(y[e:stop] <= ep["base"] + cfg.onset_z * ep["noise"])
    return e + int(back[0]) if back.size else stop


def _measure(y, base, noise, t: int, lo: int, hi: int, cfg: SpikeConfig) -> dict:
    b, s = base[t], noise[t]
    back = y[max(lo, t - cfg.window) : t] > b + cfg.onset_z * s
    quiet = np.flatnonzero(~back)
    start = t - (back.size - (quiet[-1] + 1 if quiet.size else 0))
    if start < t and start > lo:
        b, s = prev_median(y, start, lo, cfg.window), noise[start]
    end, recovered = _recovery(y, t, hi, b, s, cfg)
    peak = start + int(np.argmax(y[start:end]))
    elevated = int(np.count_nonzero(y[start:end] > b + cfg.onset_z * s))
    ratio = capped_exp(y[peak] - b)
    return {
        "trigger": t,
        "start": start,
        "end": end,
        "peak": peak,
        "recovered": recovered,
        "elevated": elevated,
        "ratio": ratio,
        "base": b,
        "noise": s,
        "z": float((y[peak] - b) / s),
    }


def _recovery(y: np.ndarray, t: int, hi: int, b: float, s: float, cfg: SpikeConfig):
    """First record after ``t`` back within ``onset_z`` deviations of the baseline ``b``
    or within ``recover_frac`` of the excursion so far, searched in growing chunks (most
    spikes end within a few records); ``hi`` and False when there is none."""
    size, top = 4 * cfg.window, -np.inf
    lo = t
    while lo < hi:
        chunk = y[lo : min(hi, lo + size)]
        excursion = np.maximum(np.maximum.accumulate(chunk), top) - b
        level = b + np.maximum(cfg.onset_z * s, cfg.recover_frac * excursion)
        ok = chunk <= level
        if lo == t:
            ok[0] = False
        hit = np.flatnonzero(ok)
        if hit.size:
            return lo + int(hit[0]), True
        top = max(top, float(chunk.max()))
        lo, size = lo + chunk.size, size * 4
    return hi, False


def _to_finding(a, ep: dict, cfg: SpikeConfig, kind: str, detector: str) -> Finding:
    step = a["step"]
    last = ep["end"] - 1 if not ep["recovered"] else ep["end"]
    base, peak = capped_exp(ep["base"]), capped_exp(a["y"][ep["peak"]])
    lone = ep["elevated"] < cfg.min_records and ep["recovered"]  # one bad record, gone
    critical = not lone and (ep["ratio"] >= cfg.critical_ratio or not ep["recovered"])
    what = cfg.column
    msg = (
        f"{what} rose {ep['ratio']:.2f}x ({fmt(base)} -> {fmt(peak)} at step "
        f"{int(step[ep['peak']])}); "
        + (
            f"back to baseline at step {int(step[last])}"
            if ep["recovered"]
            else f"not recovered by step {int(step[last])}"
        )
    )
    lineage = int(a["lineage"][ep["trigger"]])
    if lineage:
        msg += " (in steps later recomputed after a restart)"
    return finding(
        kind,
        detector,
        "critical" if critical else "warning",
        step=int(step[ep["trigger"]]),
        start_step=int(step[ep["start"]]),
        end_step=int(step[last]),
        score=ep["z"],
        message=msg,
        segment=int(a["segment"][ep["start"]]),
        evidence={
            "metric": what,
            "baseline": base,
            "peak": peak,
            "peak_step": int(step[ep["peak"]]),
            "ratio": ep["ratio"],
            "recovered": ep["recovered"],
            "records": int(ep["end"] - ep["start"]),
            "superseded": True if lineage else None,
        },
    )
