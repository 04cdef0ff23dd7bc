"""``replay segment --calibrate``: find the small-model LR at which the recorded segment
shows the real run's instability at the same relative position, before any verdict.

One ``recorded`` run (first seed) per LR of the sweep; each is checked as
:mod:`replay.fidelity` checks the full run. The chosen LR is the one whose spike comes
nearest to the real one's mapped position, among those within the tolerance (the lower
LR on a tie); none: the instability is not reproduced at any LR of the sweep, and no
variant is run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from logbook.run import Run
from replay.config import ReplayConfig
from replay.experiment import pool_map
from replay.fidelity import TOLERANCE, Fidelity, check, first_instability, uncarried
from replay.segment import SegmentPlan, plan_segment
from replay.segment_run import RECORDED, run_segment_job, segment_jobs

DEFAULT_SWEEP = (0.01, 0.03, 0.1, 0.3, 1.0)


@dataclass
class Calibration:
    lrs: list[float]
    fidelity: list[Fidelity]
    chosen: float | None
    real: tuple[int, str] | None
    missing: list[str] = field(default_factory=list)  # real evidence the mapping ignores

    def lines(self) -> list[str]:
        if self.real is None:
            return ["calibration: skipped: the real window has no instability to match"]
        out = [
            f"calibration: one recorded run per small-model LR, the real {self.real[1]} at "
            f"step {self.real[0]} to be matched within {TOLERANCE:.0%} of the segment:",
            "",
            "| small-model LR | spike (small step) | reproduced |",
            "|---|---|---|",
        ]
        for lr, fid in zip(self.lrs, self.fidelity, strict=True):
            at = fid.small_steps[0] if fid.small_steps else None
            early = fid.warmup_steps[0] if fid.warmup_steps else None
            shown = str(at) if at is not None else f"{early} (warm-up)" if early else "-"
            out.append(f"| {lr:g} | {shown} | {_yes(fid.reproduced)} |")
        out.append("")
        if self.chosen is None:
            out.append(
                "calibration: not reproduced at any LR of the sweep: the small model does not "
                "show this instability under the recorded actions, so no variant is run"
            )
            out += [f"- not carried over: {m}" for m in self.missing]
        else:
            out.append(f"calibration: chose small-model LR {self.chosen:g}")
        return out


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def calibrate(
    run: Run,
    start: int,
    end: int,
    cfg: ReplayConfig,
    steps: int,
    warmup: int,
    lrs: tuple[float, ...] = DEFAULT_SWEEP,
    workers: int = 1,
    ray: str | None = None,
) -> Calibration:
    first = first_instability(run, start, end)
    if first is None:
        return Calibration(list(lrs), [], None, None)
    real = first[:2]
    plans: list[SegmentPlan] = [
        plan_segment(run, start, end, steps=steps, warmup=warmup, peak_lr=lr) for lr in lrs
    ]
    jobs = [
        j for seg in plans for j in segment_jobs(seg, cfg, [], 1, None) if j.variant == RECORDED
    ]
    outcomes = pool_map(run_segment_job, jobs, workers, ray=ray)
    fids = [check(seg, run, [o], RECORDED) for seg, o in zip(plans, outcomes, strict=True)]
    best = [
        (abs(f.small_steps[0] - f.real_small), lr)
        for lr, f in zip(lrs, fids, strict=True)
        if f.reproduced and f.small_steps and f.small_steps[0] is not None
    ]
    missing = uncarried(run, start, end, first[2], plans[0].fp16 or cfg.train.fp16)
    return Calibration(list(lrs), fids, min(best)[1] if best else None, real, missing)
