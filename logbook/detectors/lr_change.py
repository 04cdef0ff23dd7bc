"""``lr_change``: a jump of the learning rate that a smooth schedule does not explain.

Works on the trajectory's learning rate (zero and missing values left out). For each
record the slope per step since the previous record is compared with what each side
predicts (the neighbouring interval's slope, or its extrapolation from two intervals);
the part of the change that neither side explains, less half the neighbours' difference
in slope (a bend of the schedule, such as the end of the warm-up falling between two
records), is the *unexplained* change. Fires
when it reaches ``min_rel_change`` (2%) of the learning rate. Also reports the parsers'
``lr_change`` events (not the setting a run starts with: a launch's echo of its LR
before the first record, with nothing before it to change from). The finding gives old,
new and ratio. Severity: info when the jump
is at a restart (a relaunch with a new schedule, ``manual`` in the evidence), comes
from a parser event marked manual, or is a jump of the series that such an event states
(an override echoed by the trainer, a chronicle's "lowered the LR" given with
``--notes``: ``stated_at`` in the evidence); warning when it happens inside a segment
with nothing saying it was meant.

Stays quiet on: the warm-up (any rise before the learning rate first stops rising, unless
at a restart), cosine/linear/inverse-sqrt decay, the end of the warm-up, print rounding, a
constant learning rate, fewer than two records, changes between values under
``floor_frac`` (1%) of the run's largest learning rate (the tail of a decay to zero), a
change across a gap in the log (steps jumping 20 times the usual interval), a fall of
under ``bend_frac`` (10%) right after a fall (a decay that steepens between coarse
records: a cosine logged once an epoch; not at a restart). A step
schedule (two drops or more of one factor, within 1%, the learning rate flat between
them: StepLR, MultiStepLR) is info.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from pydantic import Field

from logbook.detectors._arrays import gap_age
from logbook.detectors._base import Detector, DetectorConfig, finding, fmt
from logbook.detectors._frame import Context
from logbook.schema import Finding, LrChange

NAME = "lr_change"


class Config(DetectorConfig):
    """Learning-rate discontinuity threshold."""

    min_rel_change: float = Field(
        0.02, gt=0, description="Unexplained change, relative to the learning rate, that fires."
    )
    bend_frac: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="A fall under this fraction of the learning rate, right after a fall, "
        "is a decay's curvature (coarse records), not a jump.",
    )
    floor_frac: float = Field(
        0.01,
        ge=0,
        description="Changes between values below this fraction of the run's largest "
        "learning rate are not judged (the tail of a decay to zero).",
    )


WARMUP_PAUSE = 3  # records of an unchanged LR that end a warm-up


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    out = _from_series(ctx, cfg) if ctx.has("lr") else []
    series = list(out)  # the jumps of the series (events are matched against these)
    tol = max(ctx.interval, 1)
    first = ctx.run.metrics.get_column("step").min() if ctx.run.metrics.height else None
    for e in ctx.events:
        if not isinstance(e, LrChange) or e.step is None:
            continue
        if e.manual and e.old is None and e.factor is None and e.step == first:
            continue  # the LR the run started with (a setting echoed at start-up)
        near = [f for f in series if f.step is not None and abs(e.step - f.step) <= tol]
        if not near:
            out.append(_from_event(e))
        elif e.manual:
            for f in near:
                _stated(f, e)
    return out


def _stated(f: Finding, e: LrChange) -> None:
    """A jump the log or the team's notes state as deliberate (an override, "lowered the
    LR to 3e-5") is context, not a warning: info, with where it was said."""
    if f.evidence.get("manual"):
        return
    where = f"{e.source.file}:{e.source.line}" if e.source and e.source.file else "the log"
    f.severity = "info"
    f.evidence["manual"] = True
    f.evidence["stated_at"] = where
    f.message = f.message.replace("; not explained by a smooth schedule", "")
    f.message += f"; a deliberate change, stated at {where}"


def _from_series(ctx: Context, cfg: Config) -> list[Finding]:
    lr = ctx.column("lr").cast(pl.Float64).fill_null(np.nan).to_numpy()
    keep = (ctx.column("lineage").to_numpy() == 0) & np.isfinite(lr) & (lr > 0)
    step = ctx.column("step").to_numpy()[keep]
    # a step printed again (retried after an fp16 overflow): its last print
    last = np.concatenate((step[1:] != step[:-1], [True])) if step.size else step == step
    lr = lr[keep][last]
    if lr.size < 2:
        return []
    step = step[last]
    age = ctx.column("restart_age").to_numpy()[keep][last]
    prev = _shift(lr, 1)
    dstep = np.concatenate(([np.nan], np.diff(step).astype(float)))
    s = (lr - prev) / dstep  # slope per step since the previous record
    with np.errstate(invalid="ignore"):
        # the unexplained change is at most the change of slope since the previous
        # record: only rows where that reaches the threshold (or that have no previous
        # slope) are looked at closely
        p1 = _shift(s, 1)
        jump = np.abs(s - p1) * dstep >= cfg.min_rel_change * np.fmax(lr, prev)
        # (an LR that did not change is no jump, whatever the slope did)
        rows = np.flatnonzero((jump | np.isnan(p1)) & (lr != prev))
        u = _unexplained(s, lr, prev, dstep, rows)
        # the warm-up: every rise before the learning rate first stops rising (unless a
        # relaunch set it)
        # (a pause of a record or two is no end: a step retried after an fp16 overflow
        # does not move the schedule)
        ended = np.maximum.accumulate((lr < prev) | _flat(lr, prev, WARMUP_PAUSE))[rows]
        warm = ~ended & (lr[rows] > prev[rows]) & (age[rows] > 0)
        # the end of a decay to zero (8.1e-10 -> 6.7e-12: a large ratio of nothing) and
        # a comparison across a gap in the log (steps jumping 20 times the usual
        # interval: the schedule moved on unseen) say nothing of a jump
        tiny = np.fmax(lr[rows], prev[rows]) < cfg.floor_frac * float(lr.max())
        gapped = gap_age(step, np.zeros(step.size, np.int32))[rows] == 0
        # a decay that steepens between two coarse records (a cosine sampled once an
        # epoch): a fall of under ``bend_frac`` after a fall is the schedule's curvature
        falling = (s[rows] < 0) & (p1[rows] < 0)
        bend = falling & (lr[rows] >= (1 - cfg.bend_frac) * prev[rows]) & (age[rows] > 0)
        hit = (u >= cfg.min_rel_change) & ~warm & ~tiny & ~gapped & ~bend
    segment = ctx.column("segment").to_numpy()[keep]
    found = [
        _finding(
            {
                "step": int(step[i]),
                "segment": int(segment[i]),
                "restart_age": int(age[i]),
                "lr": float(lr[i]),
                "old": float(prev[i]),
                "u": float(v),
            }
        )
        for i, v in zip(rows[hit].tolist(), u[hit].tolist(), strict=True)
    ]
    _step_schedule(found, step, lr)
    return found


STEP_RATIO_TOL = 0.01  # drops of one factor: within 1% of each other
FLAT_TOL = 0.005  # a plateau: the learning rate within 0.5% between two drops


def _step_schedule(found: list[Finding], step: np.ndarray, lr: np.ndarray) -> None:
    """Drops of one factor with the learning rate flat between them (StepLR,
    MultiStepLR, an epoch-wise decay: ``5.0 -> 4.75 -> 4.51``) are a step schedule:
    info, not a warning. Two drops at least; one alone says nothing of a schedule."""
    drops = [f for f in found if f.evidence["ratio"] < 1 and not f.evidence["at_restart"]]
    if len(drops) < 2:
        return
    ratios = np.array([f.evidence["ratio"] for f in drops])
    if ratios.max() - ratios.min() > STEP_RATIO_TOL * ratios.max():
        return
    at = [int(np.searchsorted(step, f.step)) for f in drops]
    for lo, hi in zip(at, at[1:], strict=False):
        plateau = lr[lo:hi]
        if plateau.size < 2 or plateau.max() - plateau.min() > FLAT_TOL * plateau.max():
            return
    for f in drops:
        f.severity = "info"
        f.evidence["schedule"] = "step"
        f.message = f.message.replace(
            "not explained by a smooth schedule",
            f"a step schedule ({len(drops)} drops of x{ratios.mean():.3g}, flat between)",
        )


def _unexplained(
    s: np.ndarray, lr: np.ndarray, prev: np.ndarray, dstep: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """The change at ``rows`` that neither side's slope explains, relative to the
    learning rate: each side predicts the slope from its neighbour (level) and from its
    two neighbours (curvature: the flattening end of a cosine); half the neighbours'
    difference in slope (a bend of the schedule) is taken off."""
    padded = np.concatenate(([np.nan, np.nan], s, [np.nan, np.nan]))
    at = rows + 2
    p1, p2, n1, n2 = padded[at - 1], padded[at - 2], padded[at + 1], padded[at + 2]
    x = s[rows]
    left = np.fmin(np.abs(x - p1), np.abs(x - (2 * p1 - p2)))
    right = np.fmin(np.abs(x - n1), np.abs(x - (2 * n1 - n2)))
    resid = np.where(np.isnan(p1) & np.isnan(n1), np.abs(x), np.fmin(left, right))
    bend = np.nan_to_num(np.abs(n1 - p1) / 2)
    return (resid - bend) * dstep[rows] / np.fmax(lr[rows], prev[rows])


def _flat(lr: np.ndarray, prev: np.ndarray, k: int) -> np.ndarray:
    """Where the LR has stayed the same for ``k`` records in a row."""
    same = (lr == prev).astype(np.int64)
    # length of the run of equal records ending at each row
    reset = np.maximum.accumulate(np.where(same == 0, np.arange(same.size), -1))
    return np.arange(same.size) - reset >= k


def _shift(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` moved ``k`` > 0 rows later, NaN where nothing moved in."""
    out = np.full(x.size, np.nan)
    out[k:] = x[:-k]
    return out


def _finding(r: dict) -> Finding:
    at_restart = r["restart_age"] == 0
    ratio = r["lr"] / r["old"]
    where = "at a restart" if at_restart else "inside a segment"
    msg = (
        f"learning rate {fmt(r['old'])} -> {fmt(r['lr'])} ({ratio:.3g}x) at step {r['step']}, "
        f"{where}; not explained by a smooth schedule"
    )
    return finding(
        "lr_change",
        NAME,
        "info" if at_restart else "warning",
        step=r["step"],
        start_step=r["step"],
        end_step=r["step"],
        score=abs(math.log(ratio)),
        message=msg,
        segment=r["segment"],
        evidence={
            "old": r["old"],
            "new": r["lr"],
            "ratio": ratio,
            "unexplained": r["u"],
            "manual": at_restart,
            "at_restart": at_restart,
        },
    )


def _from_event(e: LrChange) -> Finding:
    ratio = e.new / e.old if e.old and e.new is not None else e.factor
    manual = bool(e.manual)
    return finding(
        "lr_change",
        NAME,
        "info" if manual else "warning",
        step=e.step,
        start_step=e.step,
        end_step=e.step,
        score=abs(math.log(ratio)) if ratio else None,
        message=(
            f"learning rate {fmt(e.old)} -> {fmt(e.new)} at step {e.step} (from the log)"
            if e.old is not None or e.new is not None or ratio is None
            else f"learning rate x{ratio:.3g} at step {e.step} (from the log)"
        ),
        segment=e.segment,
        evidence={"old": e.old, "new": e.new, "ratio": ratio, "manual": e.manual},
    )


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("lr_change",), doc=__doc__ or "")
