"""Does the small model reproduce the real run's instability? The check that decides
whether ``replay segment`` may give counterfactual verdicts at all.

The real side: ``logbook detect`` on the real run; its first loss spike, divergence,
non-finite loss or loss-scale collapse (warning or critical) whose onset lies in the
segment ``A..B``. The small side: the first instability after the warm-up in each
``recorded`` run (the recorded actions, nothing added). The instability is *reproduced*
when, in at least half of the recorded seeds, the small model's comes within
``TOLERANCE`` (10%) of the segment's small steps of the real one's mapped position. Only
then are the variants' outcomes read as verdicts on the real run; otherwise the report
says "not reproduced" and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from logbook.run import Run
from replay.experiment import Outcome
from replay.segment import SegmentPlan

TOLERANCE = 0.10  # of the segment's small steps
INSTABILITY = ("loss_spike", "divergence", "nonfinite", "loss_scale_collapse")


@dataclass
class Fidelity:
    real_step: int | None = None  # onset of the real run's first instability in A..B
    real_kind: str | None = None
    real_small: int | None = None  # the small step it maps to
    small_steps: list[int | None] = field(default_factory=list)  # per recorded seed
    warmup_steps: list[int | None] = field(default_factory=list)  # spikes in the warm-up
    reproduced: bool = False
    lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "real_step": self.real_step,
            "real_kind": self.real_kind,
            "real_small_step": self.real_small,
            "small_spike_steps": self.small_steps,
            "reproduced": self.reproduced,
            "statement": self.lines,
        }


def real_instability(run: Run, start: int, end: int) -> tuple[int, str] | None:
    """(onset step, kind) of the real run's first instability in ``start..end``."""
    hit = first_instability(run, start, end)
    return (hit[0], hit[1]) if hit else None


def first_instability(run: Run, start: int, end: int) -> tuple[int, str, list[str]] | None:
    """(onset, kind, kinds of the findings linked to it as precursors)."""
    from logbook.detectors import detect

    findings = detect(run)
    kinds = {f.id: f.kind for f in findings if f.id}
    hits = []
    for f in findings:
        if f.kind not in INSTABILITY or f.severity not in ("warning", "critical"):
            continue
        at = f.start_step if f.start_step is not None else f.step
        if at is not None and start <= at <= end:
            pre = [kinds.get(i, i) for i in f.evidence.get("precursors") or []]
            hits.append((at, INSTABILITY.index(f.kind), f.kind, sorted(set(pre))))
    if not hits:
        return None
    at, _, kind, pre = min(hits)  # on one step, a spike before a collapse
    return at, kind, pre


def uncarried(
    run: Run, start: int, end: int, precursors: list[str], fp16: bool = False
) -> list[str]:
    """What the real run shows around its instability that the mapping does not carry
    (``fp16``: the small model emulates fp16, so a moving loss scale is carried)."""
    out = []
    m = run.metrics.filter(run.metrics["step"].is_between(start, end))
    if "loss_scale" in m.columns and not fp16:
        scale = m["loss_scale"].drop_nulls()
        if scale.len() and scale.min() < scale.max():
            out.append(
                f"its fp16 loss scale moved ({scale.max():,.0f} -> {scale.min():,.0f}), "
                "which is not emulated in the segment"
            )
    if precursors:
        out.append(f"it was preceded by {', '.join(precursors)} in the real run")
    return out


def _pos(seg: SegmentPlan, small: int) -> str:
    return f"{(small - seg.warmup - 1) / seg.steps:.0%} into the segment"


def check(seg: SegmentPlan, run: Run, outcomes: list[Outcome], recorded: str) -> Fidelity:
    """The fidelity of the ``recorded`` variant's runs to the real segment."""
    fid = Fidelity()
    mine = [o for o in outcomes if o.variant == recorded]
    fid.small_steps = [
        o.spike_step if o.spike and o.spike_step and o.spike_step > seg.warmup else None
        for o in mine
    ]
    fid.warmup_steps = [
        o.spike_step if o.spike and o.spike_step and o.spike_step <= seg.warmup else None
        for o in mine
    ]
    spiked = [s for s in fid.small_steps if s is not None]
    real = first_instability(run, seg.start, seg.end)
    if real is None:
        fid.lines.append(
            f"fidelity: the real run shows no loss spike, divergence, non-finite loss or "
            f"loss-scale collapse in "
            f"steps {seg.start}..{seg.end}: there is nothing to reproduce, and the lines "
            "below say only whether the small model stays stable under each variant"
        )
        return fid
    fid.real_step, fid.real_kind, precursors = real
    fid.real_small = seg.small(fid.real_step)
    where = (
        f"the real run's {fid.real_kind} at step {fid.real_step} "
        f"({_pos(seg, fid.real_small)}, small step {fid.real_small})"
    )
    tol = max(1, round(TOLERANCE * seg.steps))
    near = [s for s in spiked if abs(s - fid.real_small) <= tol]
    fid.reproduced = bool(mine) and 2 * len(near) >= len(mine)
    if fid.reproduced:
        fid.lines.append(
            f"fidelity: reproduced: {where}; the small model under the recorded actions "
            f"spikes at small step {', '.join(map(str, near))} in {len(near)}/{len(mine)} "
            f"seed(s), within {TOLERANCE:.0%} of the segment ({tol} small steps)"
        )
        return fid
    if spiked:
        got = "spikes elsewhere: small step " + ", ".join(f"{s} ({_pos(seg, s)})" for s in spiked)
    else:
        got = f"stays stable in {len(mine)}/{len(mine)} seed(s)"
    missing = uncarried(run, seg.start, seg.end, precursors, seg.fp16)
    why = f" ({'; '.join(missing)})" if missing else ""
    fid.lines += [
        f"fidelity: not reproduced: {where}; the small model under the recorded actions {got}{why}",
        "no counterfactual verdicts: the small model does not show the real run's "
        "instability, so what a variant changes in it says nothing of the real run (try "
        "another --lr, the small model's LR at the run's peak, or --warmup)",
    ]
    return fid
