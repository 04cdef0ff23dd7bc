"""Precursor linking: which earlier findings announced a loss spike, a divergence, or a
loss-scale collapse that nothing worse follows.

For each target (``loss_spike``, ``divergence``; a ``loss_scale_collapse`` with no loss
spike or divergence starting within ``horizon_steps`` after its onset: an fp16 run whose
every step overflows dies of the collapse itself), a candidate finding (a grad-norm spike
or drift, an activation-norm, attention-logit or logz drift, a loss-scale drop or
collapse) is its precursor when it fired (its ``step``, computed from earlier records
only) before the target's onset and at most ``horizon_steps`` before it, and was still
active at most ``max_gap_steps`` before the onset. Both must lie in the same lineage (the
trajectory, or the same overwritten stretch). A candidate precedes only the nearest
target after it. The precursor gets ``precedes`` (the target's id) and ``lead_steps``
(target onset - precursor step); the target lists its precursors in its evidence.
Candidates marked ``precursor_only`` (rises too small to report on their own) are dropped
when they precede nothing.
"""

from __future__ import annotations

from pydantic import Field

from logbook.detectors._base import DetectorConfig
from logbook.schema import Finding

TARGETS = ("loss_spike", "divergence")
CANDIDATES = (
    "grad_norm_spike",
    "grad_norm_drift",
    "activation_norm_drift",
    "attn_logit_drift",
    "logz_drift",
    "param_norm_drift",
    "loss_scale_drop",
    "loss_scale_collapse",
)


class PrecursorConfig(DetectorConfig):
    """Precursor linking."""

    horizon_steps: int = Field(1000, ge=1, description="Longest lead (steps) a precursor may have.")
    max_gap_steps: int = Field(
        100, ge=0, description="A precursor must still be active this close to the onset."
    )


def _lineage(f: Finding) -> tuple:
    return (True, f.segment) if f.evidence.get("superseded") else (False, None)


def link(findings: list[Finding], cfg: PrecursorConfig, interval: int = 1) -> list[Finding]:
    """Set ``precedes``/``lead_steps`` on precursors and drop unlinked precursor-only
    findings. ``findings`` must have ids."""
    if not cfg.enabled:
        return [f for f in findings if not f.evidence.get("precursor_only")]
    gap = max(cfg.max_gap_steps, 2 * interval)
    targets = [f for f in findings if f.kind in TARGETS and f.start_step is not None]
    onsets = [t.start_step for t in targets]
    targets += [
        f
        for f in findings
        if f.kind == "loss_scale_collapse"
        and f.start_step is not None
        and not any(f.start_step <= o <= f.start_step + cfg.horizon_steps for o in onsets)
    ]
    targets.sort(key=lambda f: (f.start_step, f.id or ""))
    linked: dict[str, list[tuple[Finding, int]]] = {}
    for p in findings:
        if p.kind not in CANDIDATES or p.step is None:
            continue
        end = p.end_step if p.end_step is not None else p.step
        for t in targets:
            onset = t.start_step
            if (
                t is not p
                and _lineage(t) == _lineage(p)
                and p.step < onset <= p.step + cfg.horizon_steps
                and end >= onset - gap
            ):
                p.precedes, p.lead_steps = t.id, onset - p.step
                linked.setdefault(t.id or "", []).append((p, onset - p.step))
                break
    for t in targets:
        pre = linked.get(t.id or "")
        if not pre:
            continue
        pre.sort(key=lambda x: (-x[1], x[0].id or ""))
        first, lead = pre[0]
        t.evidence["precursors"] = [p.id for p, _ in pre]
        t.evidence["lead_steps"] = lead
        t.message += f"; preceded by {first.kind} {lead} steps before its onset"
    return [f for f in findings if f.precedes or not f.evidence.get("precursor_only")]
