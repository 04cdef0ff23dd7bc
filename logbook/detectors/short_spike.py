"""``short_spike``: a loss jump in an excerpt too short for the rolling statistics.

A pasted excerpt of a few records (``6.44 -> 11.42 -> 7.16``) is a spike to anyone who
reads it, yet gives ``loss_spike`` no window to measure noise in. Fires when, on a run
of at most ``max_records`` (20) loss records, a loss is at least ``min_ratio`` (1.3)
times the median of the records before it in its lineage (at least one record before)
and rises out of the range they span: ``above_max`` (1.15) times the highest of them,
or ``clear_ratio`` (1.5) times their median (the excerpt's own swings are its noise:
``0.56, 0.42, 0.65, 0.66`` is no spike). The finding
(kind ``loss_spike``) spans the records until the loss is back under ``recovered_ratio``
(1.2) times the baseline, or the end ("not recovered"), and says that the evidence is
short. Severity: critical at ``critical_ratio`` (2x) or not recovered (after three
records or more), warning otherwise;
info when the rise is within the excerpt's own swings: the change in log loss from one
record to the next, over at least ``swing_pairs`` (4) neighbour pairs that do not touch
the rise, varies about its median (the trend) by a robust deviation (1.4826 x MAD), and
the rise stands less than ``swing_ratio`` (3) of those above the trend (a noisy series
such as ``2.01, 3.82, 2.10, 3.30, 2.21`` swings that much every record; a steady descent
varies little about its trend, so ``0.048, 0.037, 0.027, 0.073, 0.022`` stays a spike).
A longer run's first ``max_records`` records (of its trajectory) are judged the same
way, each against at least ``first_records`` (2) records before it: early in training
the noise scale of ``loss_spike`` is still that of the warm-up descent, and hides a rise
such as ``4.61, 4.99, 4.29, 6.45, 5.71, 5.30``.

Stays quiet on: the rest of a longer run (``loss_spike`` judges it), a loss that takes
negative values (a signed objective: ratios mean nothing), a falling loss, a first
record, constant input, steps where ``loss_spike`` already found a spike, a rise of one
or two units of the values' print resolution (rounding, as in ``loss_spike``).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from logbook.detectors._base import Detector, DetectorConfig, finding
from logbook.detectors._frame import Context
from logbook.schema import Finding

NAME = "short_spike"


class Config(DetectorConfig):
    """Thresholds for short excerpts."""

    max_records: int = Field(20, ge=2, description="Longest run (loss records) judged here.")
    min_ratio: float = Field(1.3, gt=1, description="Loss / median of the records before.")
    above_max: float = Field(
        1.15, ge=1, description="Loss / the highest record before, below clear_ratio."
    )
    clear_ratio: float = Field(
        1.5, gt=1, description="Loss / median before that is a spike within their range."
    )
    recovered_ratio: float = Field(1.2, gt=1, description="Back under this times the baseline.")
    critical_ratio: float = Field(2.0, gt=1, description="Peak / baseline that is critical.")
    first_records: int = Field(
        2, ge=1, description="Records before the first one judged, at the start of a longer run."
    )
    swing_ratio: float = Field(
        3.0, gt=0, description="Rise (in log) above the trend / the excerpt's swing."
    )
    swing_pairs: int = Field(
        4, ge=1, description="Neighbour pairs outside the rise needed to measure the swing."
    )


RATIO_MAX = 1e300  # a ratio beyond this is a damaged value's: reported as this


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    if not ctx.has("loss") or ctx.signed("loss"):
        return []
    d = ctx.select(["lineage", "step", "segment", "loss"]).filter(
        pl.col("loss").is_not_null() & pl.col("loss").is_finite()
    )
    if d.height < 2:
        return []
    unit = ctx.rounding("loss")
    if d.height > cfg.max_records:  # a longer run: its first records, trajectory only
        start = d.filter(pl.col("lineage") == 0).head(cfg.max_records)
        return _episodes(start, cfg, cfg.first_records, unit) if start.height >= 2 else []
    out: list[Finding] = []
    for (_,), part in d.group_by(["lineage"], maintain_order=True):
        out += _episodes(part, cfg, 1, unit)
    return out


def _episodes(part: pl.DataFrame, cfg: Config, first: int = 1, unit: float = 0.0) -> list[Finding]:
    """Spikes of one lineage, from its record ``first`` on (records before it: the
    baseline only)."""
    loss = part.get_column("loss").to_numpy()
    steps = part.get_column("step").to_list()
    segs = part.get_column("segment").to_list()
    whole = first == 1  # (else the start of a longer run)
    out, i = [], first
    while i < loss.size:
        base = float(np.median(loss[:i]))
        within = (
            loss[i] < cfg.above_max * float(loss[:i].max()) and loss[i] < cfg.clear_ratio * base
        )
        rounding = loss[i] - base <= unit  # (a unit or two of the print's last digit)
        if base <= 0 or loss[i] < cfg.min_ratio * base or within or rounding:
            i += 1
            continue
        j = i
        while j + 1 < loss.size and loss[j + 1] >= cfg.recovered_ratio * base:
            j += 1
        peak = i + int(np.argmax(loss[i : j + 1]))
        recovered = j + 1 < loss.size
        ratio = min(float(loss[peak]) / base, RATIO_MAX)  # (python floats: no overflow)
        swing = _swing(loss, i, j, cfg)
        noise = swing is not None and np.log(ratio) - swing[0] < cfg.swing_ratio * swing[1]
        # (not recovered is critical where the rise stands on three records or more: on
        # one or two, the excerpt says too little of its level)
        severe = ratio >= cfg.critical_ratio or (not recovered and i >= 3)
        out.append(
            finding(
                "loss_spike",
                NAME,
                "info" if noise else "critical" if severe else "warning",
                step=steps[peak],
                start_step=steps[i],
                end_step=steps[j],
                score=ratio,
                segment=segs[i],
                message=(
                    f"loss {loss[peak]:.4g} at step {steps[peak]}, x{ratio:.2f} the "
                    f"{base:.4g} of the {i} record(s) before"
                    + ("" if recovered else "; not recovered by the end of the excerpt")
                    + (
                        f"; within the excerpt's own swings (x{np.exp(swing[1]):.2f} a record "
                        "about its trend)"
                        if noise
                        else ""
                    )
                    + (
                        f" (a short excerpt: {loss.size} records, judged on its own records)"
                        if whole
                        else f" (the run's first {loss.size} records, judged on their own)"
                    )
                ),
                evidence={
                    "baseline": base,
                    "peak": float(loss[peak]),
                    "ratio": ratio,
                    "recovered": recovered,
                    "records": int(loss.size),
                },
            )
        )
        i = j + 1
    return out


def _swing(loss: np.ndarray, i: int, j: int, cfg: Config) -> tuple[float, float] | None:
    """The excerpt's trend and swing, in log: the median change from one record to the
    next and its robust deviation about that, over the neighbour pairs that do not touch
    the rise over records ``i..j`` (None: fewer than ``swing_pairs`` of them, or no
    spread). A steady descent varies little about its trend, so a jump in it stands
    out; a series that swings up and down every record does not."""
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.diff(np.log(loss))
    outside = np.r_[steps[: max(i - 1, 0)], steps[j + 1 :]]  # pairs (k, k+1) off i..j
    outside = outside[np.isfinite(outside)]
    if outside.size < cfg.swing_pairs:
        return None
    trend = float(np.median(outside))
    spread = 1.4826 * float(np.median(np.abs(outside - trend)))
    return (trend, spread) if spread > 0 else None


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("loss_spike",), doc=__doc__ or "")
