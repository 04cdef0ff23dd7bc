"""Incidents: critical findings that overlap, with their precursors, taken together.

A loss spike, the divergence it turned into and the grad-norm spike under it are one
event for a reader: they get one zoomed figure and one remedy. Critical findings on the
same line of training (the trajectory, or the stretch one restart overwrote) whose spans,
widened back to their earliest precursor, overlap or touch make one incident.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from logbook.incidents import first_step, last_step
from logbook.schema import Finding

TARGETS = ("loss_spike", "divergence")


def onset(f: Finding) -> int:
    """The first step of a finding: its start, else its step, else its end (0 if none)."""
    step = first_step(f)
    return 0 if step is None else step


def last(f: Finding) -> int:
    """The last step of a finding (0 if none)."""
    step = last_step(f)
    return 0 if step is None else step


def lineage(f: Finding) -> tuple[bool, int | None]:
    """(superseded, segment): findings in overwritten records keep to their segment."""
    return (True, f.segment) if f.evidence.get("superseded") else (False, None)


@dataclass
class Incident:
    """Overlapping critical findings, the main one first, and their precursors."""

    findings: list[Finding]
    precursors: list[Finding] = field(default_factory=list)
    start: int = 0  # earliest onset, precursors included
    end: int = 0

    @property
    def main(self) -> Finding:
        return self.findings[0]

    @property
    def has_target(self) -> bool:
        return any(f.kind in TARGETS for f in self.findings)

    @property
    def score(self) -> float:
        return max((f.score or 0.0) for f in self.findings)

    @property
    def label(self) -> str:
        kinds = ", ".join(dict.fromkeys(f.kind for f in self.findings))
        return f"{kinds} at step {onset(self.main)}"


def incidents(findings: list[Finding]) -> list[Incident]:
    """The incidents of the critical findings, in step order."""
    precursors: dict[str, list[Finding]] = {}
    for f in findings:
        if f.precedes:
            precursors.setdefault(f.precedes, []).append(f)
    crit = sorted(
        (f for f in findings if f.severity == "critical"),
        key=lambda f: (onset(f), f.id or ""),
    )
    out: list[Incident] = []
    open_by_line: dict[tuple, Incident] = {}
    for f in crit:
        pre = precursors.get(f.id or "", [])
        start = min([onset(f), *(onset(p) for p in pre)])
        key = lineage(f)
        cur = open_by_line.get(key)
        if cur is not None and start <= cur.end + 1:
            cur.findings.append(f)
            cur.precursors += [p for p in pre if p not in cur.precursors]
            cur.start, cur.end = min(cur.start, start), max(cur.end, last(f))
            continue
        cur = Incident(findings=[f], precursors=list(pre), start=start, end=last(f))
        open_by_line[key] = cur
        out.append(cur)
    for inc in out:
        ids = {f.id for f in inc.findings}
        own = [f for f in inc.findings if not (f.precedes and f.precedes in ids)]
        inc.findings = sorted(own, key=lambda f: (f.kind not in TARGETS, onset(f), f.id or ""))
        inc.precursors.sort(key=lambda p: (onset(p), p.id or ""))
    return out
