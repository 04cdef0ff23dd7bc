"""Findings told as incidents: what happened, in the order it happened.

A loss spike, the grad-norm spike under it, the divergence it turned into, the
non-finite steps, the crash and the restart that rewound past it are one incident for a
reader. Findings of severity warning or critical are grouped when their spans (widened
back to their earliest precursor; a restart's span runs from the step it resumed after to
the last step before it, which covers the records it overwrote) overlap or lie within
``gap`` steps of each other; a restart or LR change of severity info joins the incident
it overlaps. Each incident has one line of account, its parts in causal
order (precursors, spikes and drifts, divergence, non-finite steps, crash, restart and
the LR change at it). Other info findings are only counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from logbook.detectors._base import SEVERITY_RANK, fmt
from logbook.schema import Finding

# the causal order of an account: what warns, what breaks, what ends it, what follows
ORDER = (
    "activation_norm_drift",
    "param_norm_drift",
    "attn_logit_drift",
    "logz_drift",
    "grad_norm_drift",
    "loss_scale_collapse",
    "grad_norm_spike",
    "loss_spike",
    "divergence",
    "zero_loss",
    "nonfinite",
    "stall",
    "throughput_drop",
    "overflow_skip",
    "crash",
    "restart",
    "lr_change",
)


ENDINGS = ("restart", "lr_change", "crash")


@dataclass
class Incident:
    """Findings that tell one story, in causal order, and the span they cover."""

    findings: list[Finding] = field(default_factory=list)
    start: int | None = None
    end: int | None = None

    @property
    def severity(self) -> str:
        return max((f.severity for f in self.findings), key=lambda s: SEVERITY_RANK[s])

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(f.kind for f in self.findings))

    def account(self) -> str:
        """One line: the parts of the incident in causal order."""
        parts = [phrase(f) for f in self.findings if not f.precedes]
        lead = [f for f in self.findings if f.precedes]
        text = " -> ".join(dict.fromkeys(parts))
        if lead:
            first = min(lead, key=lambda f: _span(f)[0] or 0)
            ahead = max((f.lead_steps or 0) for f in lead)
            kinds = ", ".join(dict.fromkeys(f.kind for f in lead))
            text = f"{kinds} from step {_span(first)[0]} ({ahead} steps ahead) -> " + text
        return text


def first_step(f: Finding) -> int | None:
    """The first step of a finding: its start, else its step, else its end."""
    return next((v for v in (f.start_step, f.step, f.end_step) if v is not None), None)


def last_step(f: Finding) -> int | None:
    """The last step of a finding: its end, else its step, else its start."""
    return next((v for v in (f.end_step, f.step, f.start_step) if v is not None), None)


def _span(f: Finding) -> tuple[int | None, int | None]:
    """The steps a finding covers; a restart's runs over the records it overwrote."""
    if f.kind == "restart":
        lo = f.evidence.get("resume_step")
        hi = f.evidence.get("last_step_before")
        lo = lo + 1 if lo is not None else f.start_step
        hi = max(x for x in (hi, f.end_step, lo) if x is not None) if lo is not None else hi
        return lo, hi
    return first_step(f), last_step(f)


def phrase(f: Finding) -> str:
    """A few words for one finding in an account."""
    ev = f.evidence
    lo, hi = f.start_step, f.end_step
    at = f"{lo}..{hi}" if lo is not None and hi is not None and lo != hi else f"{f.step}"
    if f.kind in ("loss_spike", "grad_norm_spike"):
        tail = "" if ev.get("recovered", True) else ", not recovered"
        size = f" x{fmt(ev['ratio'])}" if ev.get("ratio") is not None else ""
        if ev.get("bound_nats") is not None:  # (lm_loss_bound: no baseline to divide by)
            size = f" {fmt(ev.get('peak'))} (> {fmt(ev['bound_nats'])} nats)"
        return f"{f.kind}{size} at {ev.get('peak_step', f.step)}{tail}"
    if f.kind.endswith("_drift"):
        return f"{f.kind} x{fmt(ev.get('ratio'))} over {at}"
    if f.kind == "nonfinite":
        return f"nonfinite {'/'.join(ev.get('metrics', [])) or 'values'} at {at}"
    if f.kind == "crash":
        when = "before any record" if f.step is None else f"after {f.step}"
        line = f", line {ev['line']}" if ev.get("line") is not None else ""
        return f"crash ({ev.get('cause', '?')}) {when}{line}"
    if f.kind == "restart":
        bits = [f"resumed after {ev['resume_step']}"] if ev.get("resume_step") is not None else []
        if ev.get("lost_steps"):
            bits.append(f"{ev['lost_steps']} steps recomputed")
        if ev.get("cause"):
            bits.append(f"cause {ev['cause']}")
        return f"restart at {f.step}" + (f" ({', '.join(bits)})" if bits else "")
    if f.kind == "lr_change":
        return f"LR {fmt(ev.get('old'))} -> {fmt(ev.get('new'))} at {f.step}"
    return f"{f.kind} at {at}"


def group(findings: list[Finding], gap: int = 1) -> list[Incident]:
    """The incidents of the warning and critical findings, each with the precursors
    linked to its findings, in step order."""

    def key(f: Finding) -> tuple[int, int]:
        lo, hi = _span(f)
        return (lo if lo is not None else -1, hi if hi is not None else -1)

    main = [f for f in findings if SEVERITY_RANK[f.severity] >= 1 and not f.precedes]
    out: list[Incident] = []
    for f in sorted(main, key=key):
        lo, hi = key(f)
        cur = out[-1] if out else None
        if cur is not None and cur.end is not None and lo >= 0 and lo <= cur.end + gap:
            cur.findings.append(f)
            cur.end = max(cur.end, hi)
            continue
        out.append(Incident(findings=[f], start=lo if lo >= 0 else None, end=hi))
    # the info findings that say how an incident ended or what changed at it (a restart
    # that rewound past it, the LR set at that restart) are part of it
    for f in findings:
        if f.severity != "info" or f.precedes or f.kind not in ENDINGS:
            continue
        lo, hi = key(f)
        for inc in out:
            if inc.start is None or inc.end is None or lo < 0:
                continue
            if lo <= inc.end + gap and hi >= inc.start - gap:
                inc.findings.append(f)
                inc.end = max(inc.end, hi)
                break
    home = {f.id: inc for inc in out for f in inc.findings if f.id}
    for f in findings:
        inc = home.get(f.precedes) if f.precedes else None
        if inc is not None:
            inc.findings.append(f)
            lo = key(f)[0]
            if lo >= 0 and (inc.start is None or lo < inc.start):
                inc.start = lo
    for inc in out:
        inc.findings.sort(key=lambda f: (ORDER.index(f.kind) if f.kind in ORDER else 50, key(f)))
    return out
