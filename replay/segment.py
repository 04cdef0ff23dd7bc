"""Map a recorded run's segment (steps A..B of a real log) onto the small model.

What is carried over:

- the LR shape relative to the run's peak LR (``lr / max(lr)``), scaled to the small
  model's ``peak_lr``, interpolated linearly between records of one launch;
- the launches (segments): a relaunch that resumes before the step the previous launch
  reached is a rewind, and the small model rewinds to the state it had at the mapped
  resume step (a relaunch that resumes later just continues);
- LR changes at relaunches and manual ``lr_change`` events (visible in the LR shape, and
  listed as actions);
- ``config_change`` events whose key names gradient clipping (the recorded value is used
  as the small model's clipping threshold) or an optimizer reset;
- ``data_skip`` ranges (the small model skips the mapped batches).

Time axis: the small model first warms up linearly for ``warmup`` steps to the segment's
first LR, then step ``A + d`` of the log maps to small step ``warmup + 1 + floor(d *
steps / (B - A + 1))``; steps that carry an action are kept at least one small step apart
(the later ones shift right), so a cut at the step after a relaunch is not merged away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from logbook.errors import UsageError
from logbook.run import Run
from replay.interventions import Intervention

NO_LR = "the log has no learning rate: the small model holds its peak LR"
_CLIP_KEY = re.compile(r"clip", re.IGNORECASE)
_RESET_KEY = re.compile(r"optim.*(reset|state)|reset.*optim", re.IGNORECASE)


@dataclass
class Leg:
    """One launch inside the window, in small-model steps."""

    segment: int
    first: int  # first small step this launch trains
    last: int  # last small step this launch trains
    lr: list[float]  # LR of small steps first..last
    rewind_to: int | None = None  # small step whose state this launch resumes from


@dataclass
class SegmentPlan:
    start: int  # recorded window A..B
    end: int
    steps: int  # small steps for the window
    warmup: int
    peak_lr: float
    recorded_peak_lr: float | None
    legs: list[Leg]
    items: list[Intervention] = field(default_factory=list)  # clip / skip / reset, small steps
    actions: list[str] = field(default_factory=list)  # what was carried over, for people
    mapping: tuple[np.ndarray, np.ndarray] = field(default=None, repr=False)  # recorded->small
    peak_configured: bool = False  # the peak is the run's configured LR (its start-up dump)
    fp16: bool = False  # the log shows a loss scale in the window: train in emulated fp16
    phase: str | None = None  # where A..B sits in the planned run, when the log says

    @property
    def carried(self) -> bool:
        """Whether the log gave the small model anything: an LR shape or an action."""
        has_lr = self.recorded_peak_lr is not None and self.recorded_peak_lr > 0
        return has_lr or any(a != NO_LR for a in self.actions)

    @property
    def total(self) -> int:
        return max(leg.last for leg in self.legs)

    def small(self, step: int) -> int:
        """The small step of a recorded step (linear between mapped anchor steps)."""
        return int(self.small_of(np.array([step]))[0])

    def small_of(self, steps: np.ndarray) -> np.ndarray:
        rec, sm = self.mapping
        return np.floor(np.interp(steps.astype(np.float64), rec, sm))


def _window(run: Run, start: int, end: int) -> pl.DataFrame:
    if end < start:
        raise UsageError(f"--end {end} is before --start {start}")
    m = run.metrics.with_columns(pl.int_range(pl.len()).alias("_order"))
    m = m.filter(pl.col("step").is_between(start, end)).sort("_order")
    m = m.with_columns(pl.col("segment").fill_null(0))
    if m.height == 0:
        have = run.metrics.get_column("step").drop_nulls()
        span = f"{have.min()}..{have.max()}" if have.len() else "none"
        raise UsageError(f"no training records between steps {start} and {end} (log has {span})")
    if "lr" not in m.columns:
        m = m.with_columns(pl.lit(None, dtype=pl.Float64).alias("lr"))
    return m.select("step", "segment", "lr")


def _anchor_steps(run: Run, start: int, end: int, records: pl.DataFrame) -> np.ndarray:
    """Recorded steps that must keep distinct small steps: the window's ends, each
    launch's first and last record, and every event's steps."""
    pts = {start, end}
    bounds = records.group_by("segment", maintain_order=True).agg(
        pl.col("step").first().alias("a"), pl.col("step").last().alias("b")
    )
    pts.update(bounds.get_column("a").to_list() + bounds.get_column("b").to_list())
    for e in run.events:
        for s in (e.step, getattr(e, "resume_step", None), getattr(e, "start_step", None),
                  getattr(e, "end_step", None), getattr(e, "last_step_before", None)):  # fmt: skip
            if s is not None and start <= s <= end:
                pts.add(int(s))
    return np.array(sorted(pts), dtype=np.int64)


def _mapping(anchors: np.ndarray, start: int, end: int, steps: int, warmup: int):
    """Small step of each anchor: proportional, then pushed apart to be increasing."""
    raw = warmup + 1 + np.floor((anchors - start) * steps / (end - start + 1)).astype(np.int64)
    # Strictly increasing: each anchor at least one past the previous one.
    bump = np.maximum.accumulate(raw - np.arange(len(raw))) + np.arange(len(raw))
    return anchors.astype(np.float64), bump.astype(np.float64)


def plan_segment(
    run: Run, start: int, end: int, steps: int = 200, warmup: int = 50, peak_lr: float = 0.15
) -> SegmentPlan:
    """The small-model plan for recorded steps ``start..end`` of ``run``."""
    if steps < 1 or warmup < 0 or peak_lr <= 0:
        raise UsageError("need --steps >= 1, --warmup >= 0 and --lr > 0")
    rec = _window(run, start, end)
    lr_all = run.metrics.get_column("lr") if "lr" in run.metrics.columns else None
    peak = (
        float(lr_all.drop_nulls().max())
        if lr_all is not None and lr_all.drop_nulls().len()
        else None
    )
    args = (run.meta.model_extra or {}).get("arguments") or {}
    configured = args.get("lr")
    if isinstance(configured, int | float) and configured > 0 and peak is not None:
        peak = float(configured)  # the planned peak, not the excerpt's own largest LR
    anchors = _anchor_steps(run, start, end, rec)
    mapping = _mapping(anchors, start, end, steps, warmup)
    plan = SegmentPlan(start, end, steps, warmup, peak_lr, peak, [], mapping=mapping)
    plan.peak_configured = isinstance(configured, int | float) and configured > 0
    plan.phase = schedule_phase(run, start, end)
    m = run.metrics
    if "loss_scale" in m.columns and (
        m.filter(pl.col("step").is_between(start, end)).get_column("loss_scale").drop_nulls().len()
    ):
        plan.fp16 = True
        plan.actions.append(
            "fp16: the log gives a loss scale, so the small model trains in emulated fp16 "
            "(dynamic loss scale, fp16's range for gradients and attention scores)"
        )
    if peak is None or peak <= 0:
        plan.actions.append(NO_LR)
    _legs(plan, run, rec)
    _events(plan, run)
    return plan


def schedule_phase(run: Run, start: int, end: int) -> str | None:
    """Where steps ``start..end`` sit in the planned run: a share of the planned
    iterations, and warm-up or after, from the start-up arguments or the records'
    ``iteration N/ M`` (None: the log does not say)."""
    extra = run.meta.model_extra or {}
    args = extra.get("arguments") or {}
    total = args.get("train_iters") or extra.get("train_iters")
    if not isinstance(total, int) or total <= 0:
        return None
    share = f"{start / total:.1%}-{end / total:.1%}"
    text = f"steps {start}..{end} are {share} of the planned {total:,} iterations"
    warm = args.get("lr_warmup_iters")
    if not warm and isinstance(args.get("lr_warmup_fraction"), float):
        warm = round(args["lr_warmup_fraction"] * total)
    if isinstance(warm, int) and warm > 0:
        where = "inside" if start <= warm else "after"
        text += f"; {where} the warm-up of {warm:,} iterations"
    style = args.get("lr_decay_style")
    if isinstance(style, str):
        text += f"; {style} decay"
    return text


def _rel_lr(plan: SegmentPlan, lr: pl.Series) -> np.ndarray:
    if plan.recorded_peak_lr is None or plan.recorded_peak_lr <= 0:
        return np.full(lr.len(), plan.peak_lr)
    vals = lr.cast(pl.Float64).fill_null(strategy="forward").fill_null(strategy="backward")
    vals = vals.fill_null(plan.recorded_peak_lr).to_numpy()
    return vals / plan.recorded_peak_lr * plan.peak_lr


def _legs(plan: SegmentPlan, run: Run, rec: pl.DataFrame) -> None:
    restarts = {e.segment: e for e in run.events_of("restart")}
    prev: tuple[float, float] | None = None  # (small step, LR) of the last record so far
    reached = plan.warmup
    for seg in dict.fromkeys(rec.get_column("segment").to_list()):
        part = rec.filter(pl.col("segment") == seg)
        steps = part.get_column("step").to_numpy()
        at, lr = _dedupe(plan.small_of(steps), _rel_lr(plan, part.get_column("lr")))
        first_small = int(at[0])
        rewind_to = None
        if plan.legs:
            r = restarts.get(seg)
            resume = r.resume_step if r is not None and r.resume_step is not None else None
            resume = int(steps[0]) - 1 if resume is None else int(resume)
            resume_small = plan.small(resume) if resume >= plan.start else plan.warmup
            if resume_small < reached:
                rewind_to = resume_small
                plan.actions.append(
                    f"rewind: relaunch at recorded step {int(steps[0])} resumes from step "
                    f"{resume} (small step {reached} back to {resume_small})"
                )
            else:
                plan.actions.append(
                    f"relaunch at recorded step {int(steps[0])} resumes from step {resume} "
                    f"(no rewind: small step {reached} goes on)"
                )
            first_small = (resume_small if rewind_to is not None else reached) + 1
            _lr_jump(plan, _lr_before(plan.legs[-1], first_small, prev), lr[0], int(steps[0]),
                     first_small)  # fmt: skip
        else:
            first_small = plan.warmup + 1
        xs, ys = at, lr
        if prev is not None and rewind_to is None:
            xs, ys = np.concatenate([[prev[0]], at]), np.concatenate([[prev[1]], lr])
        last_small = max(int(at[-1]), first_small)
        series = np.interp(np.arange(first_small, last_small + 1), xs, ys)
        plan.legs.append(Leg(int(seg), first_small, last_small, series.tolist(), rewind_to))
        prev, reached = (at[-1], lr[-1]), last_small
    first = plan.legs[0]
    ramp = [first.lr[0] * k / plan.warmup for k in range(1, plan.warmup + 1)]
    first.first, first.lr = 1, ramp + first.lr


def _dedupe(at: np.ndarray, lr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One point per small step (the last record mapped there), for interpolation."""
    keep = np.append(at[1:] != at[:-1], True)
    return at[keep], lr[keep]


def _lr_before(leg: Leg, small: int, prev) -> float:
    """The LR the previous launch had at ``small`` (its last LR when it ended earlier)."""
    i = small - leg.first
    return leg.lr[i] if 0 <= i < len(leg.lr) else prev[1]


def _lr_jump(plan: SegmentPlan, old: float, new_lr: float, step: int, small: int) -> None:
    if old <= 0 or abs(new_lr / old - 1.0) < 1e-3:
        return
    plan.actions.append(
        f"LR at the relaunch x{new_lr / old:.4g} (recorded step {step}, small step {small})"
    )


def _leg_of(plan: SegmentPlan, segment: int) -> int:
    """Index of the launch (leg) a recorded segment's event belongs to."""
    idx = [i for i, leg in enumerate(plan.legs) if leg.segment <= segment]
    return idx[-1] if idx else 0


def _events(plan: SegmentPlan, run: Run) -> None:
    for e in run.events:
        if e.step is None or not plan.start <= e.step <= plan.end:
            continue
        at, leg = plan.small(e.step), _leg_of(plan, e.segment)
        if e.kind == "lr_change" and getattr(e, "manual", None):
            plan.actions.append(
                f"manual LR change {e.old} -> {e.new} at recorded step {e.step} (small step {at})"
            )
        elif e.kind == "config_change" and _CLIP_KEY.search(e.key):
            try:
                value = float(e.new)
            except (TypeError, ValueError):
                continue
            plan.items.append(Intervention(kind="clip", value=value, start=at, segment=leg))
            plan.actions.append(f"clip {value:g} from recorded step {e.step} (small step {at})")
        elif e.kind == "config_change" and _RESET_KEY.search(e.key):
            plan.items.append(Intervention(kind="reset_opt", start=at, segment=leg))
            plan.actions.append(f"optimizer reset at recorded step {e.step} (small step {at})")
        elif e.kind == "data_skip" and e.start_step is not None:
            a = plan.small(max(e.start_step, plan.start))
            b = plan.small(min(e.end_step if e.end_step is not None else e.start_step, plan.end))
            plan.items.append(Intervention(kind="skip", start=a, end=max(a, b), segment=leg))
            plan.actions.append(
                f"skip batches of recorded steps {e.start_step}-{e.end_step} "
                f"(small steps {a}-{max(a, b)})"
            )
