"""Drive the small model through a mapped segment, with and without the recorded actions.

Variants of ``logbook replay segment``:

- ``recorded``: the recorded LR shape, relaunches (rewinds), clip changes, optimizer
  resets and skipped batch ranges;
- ``no_actions``: what the run would have done without them: the first launch's LR
  shape held at its last value, no rewind, no skip, no clip change;
- each ``--variant NAME=SPEC``: the recorded actions plus the SPEC's changes (steps in
  SPEC, ``@S`` and ``skip:A-B``, are recorded steps; ``skip:+N`` counts small steps from
  the segment's start).

Every variant starts from scratch with the small model's own seed, so seeds vary model
init and data order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from logbook.errors import UsageError
from logbook.run import Run
from replay.checkpoint import clone_tree, snapshot
from replay.config import ReplayConfig
from replay.engine import Trainer
from replay.experiment import Outcome, pool_map, summarize
from replay.interventions import Intervention, Plan
from replay.optim import Schedule
from replay.segment import Leg, SegmentPlan

RECORDED, NO_ACTIONS = "recorded", "no_actions"


@dataclass(kw_only=True)
class SegmentJob:
    plan: SegmentPlan
    config: dict
    variant: str
    extra: list[dict]
    seed: int
    out: str | None


def to_small(plan: Plan, seg: SegmentPlan) -> Plan:
    """A variant's interventions with recorded steps mapped to small steps."""
    items = []
    for i in plan.items:
        if i.kind == "skip" and i.count is None:
            i = replace(i, start=seg.small(i.start), end=max(seg.small(i.start), seg.small(i.end)))
        elif i.start is not None and i.kind != "skip":
            i = replace(i, start=seg.small(i.start))
        items.append(i)
    return Plan(items).resolved(seg.warmup + 1)


def legs_for(seg: SegmentPlan, variant: str) -> tuple[list[Leg], list[Intervention]]:
    """The launches and recorded interventions a variant runs with."""
    if variant != NO_ACTIONS:
        return seg.legs, list(seg.items)
    first = seg.legs[0]
    tail = [first.lr[-1]] * (seg.total - first.last)
    return [Leg(first.segment, 1, seg.total, first.lr + tail)], []


def drive(seg: SegmentPlan, cfg: ReplayConfig, variant: str, extra: Plan, name: str) -> Run:
    """Train the small model through the segment; rewinds restore the state it had at the
    mapped resume step (the latest time it passed that step)."""
    legs, items = legs_for(seg, variant)
    trainer = Trainer(cfg, Plan(items + extra.items), name=name)
    targets = {leg.rewind_to for leg in legs if leg.rewind_to is not None}
    saved: dict[int, dict] = {}

    def keep(tr: Trainer) -> None:
        if tr.step in targets:
            saved[tr.step] = snapshot(tr)

    keep(trainer)
    for i, leg in enumerate(legs):
        if i > 0:  # a relaunch: back to the mapped resume step, or on from here
            back = clone_tree(saved[leg.rewind_to]) if leg.rewind_to is not None else None
            trainer.rewind_to(back, cause="recorded relaunch")
        trainer.schedule = Schedule(peak=seg.peak_lr, series=leg.lr, series_start=leg.first)
        trainer.run(leg.last, on_step=keep)
    return trainer.to_run()


def run_segment_job(job: SegmentJob) -> Outcome:
    cfg = ReplayConfig.from_dict(job.config)
    cfg.train.seed = job.seed
    name = f"{job.variant}-seed{job.seed}"
    run = drive(job.plan, cfg, job.variant, Plan.from_list(job.extra), name)
    run_file = ""
    if job.out is not None:
        path = Path(job.out) / "runs" / f"{name}.jsonl"
        run.write(path)
        run_file = str(path.relative_to(job.out))
    seg = job.plan
    # Spikes count from step 0: a model that broke during its warm-up is not "stable".
    return summarize(run, job.variant, job.seed, seg.warmup, seg.total, run_file, 0)


def segment_jobs(
    seg: SegmentPlan,
    cfg: ReplayConfig,
    variants: list[tuple[str, Plan]],
    seeds: int,
    out: str | Path | None,
) -> list[SegmentJob]:
    names = [RECORDED, NO_ACTIONS] + [n for n, _ in variants]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"variant names must be unique (recorded, no_actions are taken): {dupes}")
    if seeds < 1:
        raise UsageError("--seeds must be >= 1")
    fp16 = cfg.train.fp16 or seg.fp16
    cfg = replace(cfg, train=replace(cfg.train, lr=seg.peak_lr, steps=seg.total, fp16=fp16))
    cfg = cfg.check()
    todo = [(RECORDED, Plan()), (NO_ACTIONS, Plan())] + [(n, to_small(p, seg)) for n, p in variants]
    return [
        SegmentJob(
            plan=seg,
            config=cfg.to_dict(),
            variant=name,
            extra=plan.to_list(),
            seed=cfg.train.seed + i,
            out=None if out is None else str(out),
        )
        for name, plan in todo
        for i in range(seeds)
    ]


def run_segment(
    seg: SegmentPlan,
    cfg: ReplayConfig,
    variants: list[tuple[str, Plan]],
    seeds: int = 1,
    workers: int = 1,
    out: str | Path | None = None,
    ray: str | None = None,
) -> list[Outcome]:
    """All variants x seeds of a mapped segment (runs written under ``out`` if given), on
    ``workers`` processes or on Ray at ``ray``."""
    jobs = segment_jobs(seg, cfg, variants, seeds, out)
    return pool_map(run_segment_job, jobs, workers, ray=ray)
