"""Matching findings to labels, and the scores ``eval_detect`` prints.

A finding matches a label of its kind when their step ranges overlap, each widened by
``tol`` steps (three log intervals). Each label and each finding is matched at most once
(closest starts first). A finding that matches nothing but overlaps the window of a label
of another incident kind (a spike's precursor ramp, a collapse, a drift, a divergence,
a slowdown) is *explained*: neither a hit nor a false alarm. Healthy steps are the steps
of the run outside every label window (widened by ``tol`` + 50 steps); a false alarm is
a finding of severity warning or critical that overlaps neither a label of its kind nor
such an incident window (restarts, LR changes and non-finite records explain nothing
else: a spike at a restart is a false alarm).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

EXPLAINING = (
    "loss_spike",
    "divergence",
    "loss_scale_collapse",
    "activation_norm_drift",
    "throughput_drop",
)
ALARM = ("warning", "critical")


@dataclass
class Tally:
    """Counts of one kind (or one baseline) over the benchmark."""

    labels: int = 0
    findings: int = 0
    hits: int = 0  # labels matched
    matched_findings: int = 0
    explained: int = 0
    false_alarms: int = 0  # unmatched, unexplained, severity >= warning
    leads: list[float] = field(default_factory=list)
    ramps: list[float] = field(default_factory=list)
    with_pre: int = 0
    pre_found: int = 0
    without_pre: int = 0
    spurious_pre: int = 0

    @property
    def precision(self) -> float:
        judged = self.findings - self.explained
        return self.matched_findings / judged if judged else 1.0

    @property
    def recall(self) -> float:
        return self.hits / self.labels if self.labels else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def _span(x: dict[str, Any]) -> tuple[int, int]:
    return int(x["start"]), int(x["end"])


def match(labels: list[dict], found: list[dict], tol: int) -> dict[int, int]:
    """label index -> finding index, one to one, overlapping within ``tol``."""
    pairs = []
    for i, lab in enumerate(labels):
        a, b = _span(lab)
        for j, f in enumerate(found):
            c, d = _span(f)
            if c - tol <= b and d + tol >= a:
                pairs.append((abs(c - a), i, j))
    out: dict[int, int] = {}
    used: set[int] = set()
    for _, i, j in sorted(pairs):
        if i not in out and j not in used:
            out[i] = j
            used.add(j)
    return out


def explained(f: dict, labels: list[dict], tol: int) -> bool:
    c, d = _span(f)
    for lab in labels:
        if lab["kind"] == f["kind"] or lab["kind"] not in EXPLAINING:
            continue
        a, b = lab["window"]
        if c - tol <= b and d + tol >= a:
            return True
    return False


def healthy_steps(first: int, last: int, labels: list[dict], tol: int) -> int:
    """Steps in first..last outside every label window (widened)."""
    if last < first:
        return 0
    mask = np.ones(last - first + 1, dtype=bool)
    for lab in labels:
        a, b = lab["window"]
        lo, hi = max(first, a - tol - 50), min(last, b + tol + 50)
        if hi >= lo:
            mask[lo - first : hi - first + 1] = False
    return int(mask.sum())


def score_kind(t: Tally, kind: str, labels: list[dict], found: list[dict], tol: int) -> None:
    """Add one run's labels and findings of ``kind`` to ``t``."""
    labs = [lab for lab in labels if lab["kind"] == kind]
    fs = [f for f in found if f["kind"] == kind]
    m = match(labs, fs, tol)
    t.labels += len(labs)
    t.findings += len(fs)
    t.hits += len(m)
    t.matched_findings += len(m)
    hit = set(m.values())
    for j, f in enumerate(fs):
        if j in hit:
            continue
        if explained(f, labels, tol):
            t.explained += 1
        elif f.get("severity", "warning") in ALARM and not _overlaps_any(f, labels, tol):
            t.false_alarms += 1
    if kind == "loss_spike":
        _precursors(t, labs, fs, m)


def _overlaps_any(f: dict, labels: list[dict], tol: int) -> bool:
    """Whether a finding is accounted for: it overlaps a label of its own kind, or the
    window of an incident that shows in several metrics (a spike with its precursor ramp,
    a collapse, a drift, a divergence, a slowdown). A restart, an LR change or a
    non-finite record explains only findings of its own kind: a spike at a restart is a
    false alarm."""
    c, d = _span(f)
    return any(
        c - tol <= lab["window"][1]
        and d + tol >= lab["window"][0]
        and (lab["kind"] == f["kind"] or lab["kind"] in EXPLAINING)
        for lab in labels
    )


def _precursors(t: Tally, labs: list[dict], fs: list[dict], m: dict[int, int]) -> None:
    for i, lab in enumerate(labs):
        f = fs[m[i]] if i in m else None
        linked = f is not None and f.get("lead_steps") is not None
        if lab.get("precursor"):
            t.with_pre += 1
            if linked:
                t.pre_found += 1
                t.leads.append(float(f["lead_steps"]))
                t.ramps.append(float(lab["ramp"]))
        else:
            t.without_pre += 1
            t.spurious_pre += int(linked)


def finding_dict(f: Any) -> dict:
    """A logbook Finding as the dict the matcher reads."""
    start = f.start_step if f.start_step is not None else f.step
    end = f.end_step if f.end_step is not None else start
    return {
        "kind": f.kind,
        "start": start,
        "end": end,
        "step": f.step,
        "severity": f.severity,
        "lead_steps": f.evidence.get("lead_steps"),
    }
