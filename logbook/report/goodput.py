"""Restart and goodput accounting: what every relaunch cost, and what checkpointing at the
Young–Daly interval would have saved. The formulas are written out in docs/report.md.

Notation: τ the median time per step, W the wall time of the run (first to last record),
G the restart gaps, R the recomputed steps times τ, S the checkpoint saves times their
save time δ. Useful time T = W − G − R − S; measured goodput T / W. Failures F are the
restarts with crash evidence (a ``cause``); MTBF M = W / F. Young–Daly interval
τ_opt = sqrt(2 δ M). Modelled wall time at a checkpoint interval τ_c:
W(τ_c) = T + δ T / τ_c + F (R_f + τ_c / 2) + D, with R_f the mean gap of a failure and D
the cost of the deliberate restarts (unchanged by the interval); modelled goodput
T / W(τ_c).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from logbook.run import Run
from logbook.schema import CheckpointSave, Restart, Source


@dataclass
class RestartCost:
    """One relaunch: where, why, and what it cost."""

    step: int | None  # the first step trained after the relaunch
    segment: int
    resume_step: int | None
    last_step_before: int | None
    cause: str | None
    gap_s: float | None
    lost_steps: int
    recompute_s: float | None  # lost_steps x the median step time
    source: Source | None

    @property
    def failure(self) -> bool:
        """A relaunch after crash evidence (counted in the MTBF)."""
        return self.cause is not None

    @property
    def cost_s(self) -> float | None:
        if self.gap_s is None and self.recompute_s is None:
            return None
        return (self.gap_s or 0.0) + (self.recompute_s or 0.0)


@dataclass
class Goodput:
    """The accounting of a run; ``None`` where the log does not tell."""

    restarts: list[RestartCost] = field(default_factory=list)
    step_time_s: float | None = None  # τ
    wall_s: float | None = None  # W
    wall_estimated: bool = False  # no timestamps: W built from step times and gaps
    gaps_s: float = 0.0  # G
    recompute_s: float = 0.0  # R
    saves: int = 0
    save_time_s: float | None = None  # δ
    saves_s: float = 0.0  # S
    interval_steps: float | None = None  # checkpoint interval, steps
    interval_s: float | None = None  # τ_c = interval_steps x τ
    failures: int = 0  # F
    mtbf_s: float | None = None  # M
    useful_s: float | None = None  # T
    goodput: float | None = None  # T / W
    young_daly_s: float | None = None  # τ_opt
    young_daly_steps: float | None = None
    modelled_actual: float | None = None  # T / W(τ_c)
    modelled_optimal: float | None = None  # T / W(τ_opt)
    notes: list[str] = field(default_factory=list)


def account(run: Run) -> Goodput:
    """The restart and goodput accounting of ``run``."""
    g = Goodput(step_time_s=median_step_time(run.metrics))
    tau = g.step_time_s
    for e in run.events_of("restart"):
        assert isinstance(e, Restart)
        lost = e.lost_steps or 0
        g.restarts.append(
            RestartCost(
                step=e.step,
                segment=e.segment,
                resume_step=e.resume_step,
                last_step_before=e.last_step_before,
                cause=e.cause,
                gap_s=e.gap_s,
                lost_steps=lost,
                recompute_s=lost * tau if tau is not None else None,
                source=e.source,
            )
        )
    g.gaps_s = sum(r.gap_s or 0.0 for r in g.restarts)
    unknown = sum(1 for r in g.restarts if r.gap_s is None)
    if unknown:
        g.notes.append(
            f"{unknown} restart gap(s) unknown (no timestamps around the relaunch): counted "
            "as 0 s, so the goodput is an upper bound"
        )
    g.recompute_s = sum(r.recompute_s or 0.0 for r in g.restarts)
    _checkpoints(run, g)
    _wall(run, g)
    _model(g)
    return g


def median_step_time(metrics: pl.DataFrame) -> float | None:
    """τ: the median of ``step_time_s``, else of the time between consecutive records of a
    segment divided by the steps between them."""
    if "step_time_s" in metrics.columns:
        v = metrics.get_column("step_time_s")
        v = v.filter(v.is_finite() & (v > 0))
        if v.len():
            return float(v.median())
    if metrics.get_column("time").drop_nulls().len() < 2:
        return None
    per = (
        metrics.filter(pl.col("time").is_not_null() & pl.col("step").is_not_null())
        .select(
            (pl.col("time").diff().dt.total_microseconds() / 1e6 / pl.col("step").diff())
            .over("segment")
            .alias("t")
        )
        .get_column("t")
    )
    per = per.filter(per.is_finite() & (per > 0))
    return float(per.median()) if per.len() else None


def _checkpoints(run: Run, g: Goodput) -> None:
    saves = [e for e in run.events_of("checkpoint_save") if isinstance(e, CheckpointSave)]
    g.saves = len(saves)
    times = [e.save_time_s for e in saves if e.save_time_s is not None]
    if times:
        g.save_time_s = float(np.median(times))
        g.saves_s = g.saves * g.save_time_s
    diffs: list[int] = []
    for seg in sorted({e.segment for e in saves}):
        steps = sorted({e.step for e in saves if e.segment == seg and e.step is not None})
        diffs += [b - a for a, b in zip(steps, steps[1:], strict=False)]
    if diffs:
        g.interval_steps = float(np.median(diffs))
        if g.step_time_s is not None:
            g.interval_s = g.interval_steps * g.step_time_s
    elif g.saves:
        g.notes.append("fewer than two checkpoint saves in one launch: no checkpoint interval")


def _wall(run: Run, g: Goodput) -> None:
    m = run.metrics
    times = m.get_column("time").drop_nulls()
    if times.len() >= 2:
        g.wall_s = (times.max() - times.min()).total_seconds()
    elif g.step_time_s is not None and m.height:
        span = (
            m.filter(pl.col("step").is_not_null())
            .group_by("segment")
            .agg((pl.col("step").max() - pl.col("step").min()).alias("n"))
            .get_column("n")
            .sum()
        )
        g.wall_s = float(span) * g.step_time_s + g.gaps_s + g.saves_s
        g.wall_estimated = True
    if g.wall_s is None or g.wall_s <= 0:
        g.notes.append("no wall time: neither timestamps nor step times in the log")
        return
    g.useful_s = g.wall_s - g.gaps_s - g.recompute_s - g.saves_s
    g.goodput = g.useful_s / g.wall_s


def _model(g: Goodput) -> None:
    failures = [r for r in g.restarts if r.failure]
    g.failures = len(failures)
    if g.wall_s is None or g.useful_s is None:
        return
    if not failures:
        g.notes.append("no failure observed (no restart with crash evidence): no MTBF")
        return
    g.mtbf_s = g.wall_s / g.failures
    if g.save_time_s is None or g.save_time_s <= 0:
        g.notes.append("no checkpoint save time in the log: no Young–Daly interval")
        return
    g.young_daly_s = math.sqrt(2.0 * g.save_time_s * g.mtbf_s)
    if g.step_time_s:
        g.young_daly_steps = g.young_daly_s / g.step_time_s
    g.modelled_optimal = modelled_goodput(g, g.young_daly_s)
    if g.interval_s:
        g.modelled_actual = modelled_goodput(g, g.interval_s)


def modelled_goodput(g: Goodput, interval_s: float) -> float | None:
    """T / W(τ_c): the goodput the run would have had checkpointing every ``interval_s``
    seconds of training, with the same failures, restart gaps and deliberate restarts."""
    if g.useful_s is None or g.save_time_s is None or interval_s <= 0:
        return None
    failures = [r for r in g.restarts if r.failure]
    gaps = [r.gap_s for r in failures if r.gap_s is not None]
    restart_s = sum(gaps) / len(gaps) if gaps else 0.0
    deliberate = sum(r.cost_s or 0.0 for r in g.restarts if not r.failure)
    t = g.useful_s
    wall = t + g.save_time_s * t / interval_s + len(failures) * (restart_s + interval_s / 2)
    wall += deliberate
    return t / wall if wall > 0 else None
