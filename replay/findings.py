"""What ``logbook detect`` says about a replayed run: its spikes and their precursors.

This is the one place the replay engine calls the detectors, so ``spike present`` in a
counterfactual table means exactly what ``logbook detect RUN`` reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbook.run import Run
from logbook.schema import Finding

# what counts as the instability in a counterfactual: a loss spike, a divergence, a
# non-finite loss or a loss-scale collapse (warning or critical)
SPIKE_KINDS = ("loss_spike", "divergence", "nonfinite", "loss_scale_collapse")


@dataclass
class SpikeReport:
    """The spikes (and divergences) that start inside a step window."""

    spikes: list[Finding]
    precursors: dict[str, list[Finding]]  # spike id -> the findings that preceded it

    @property
    def present(self) -> bool:
        return bool(self.spikes)

    @property
    def first_step(self) -> int | None:
        return self.spikes[0].start_step if self.spikes else None

    def precursor_kinds(self) -> list[str]:
        if not self.spikes:
            return []
        return sorted({p.kind for p in self.precursors.get(self.spikes[0].id or "", [])})


def detect_findings(run: Run) -> list[Finding]:
    """All findings of ``logbook detect`` (default thresholds) on ``run``."""
    from logbook.detectors import detect

    return detect(run)


def spikes_in(run: Run, after: int = 0, until: int | None = None) -> SpikeReport:
    """Instabilities (``SPIKE_KINDS``, warning or critical) whose onset lies in
    ``(after, until]``."""
    found = detect_findings(run)
    spikes = [
        f
        for f in found
        if f.kind in SPIKE_KINDS
        and f.severity != "info"
        and f.start_step is not None
        and f.start_step > after
        and (until is None or f.start_step <= until)
    ]
    spikes.sort(key=lambda f: (f.start_step, f.kind))
    ids = {f.id for f in spikes}
    pre: dict[str, list[Finding]] = {}
    for f in found:
        if f.precedes in ids:
            pre.setdefault(f.precedes, []).append(f)
    return SpikeReport(spikes, pre)
