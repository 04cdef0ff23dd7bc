"""Detection on the hand-labelled real logs of a corpus (``labels.json`` + ``logs/``).

For every labelled file: parse it (``parsers.read_log``), run the detectors, and check
each label: a loss spike is found when its step lies in a ``loss_spike`` (or
``divergence``) finding, widened by one log interval; a grad-norm spike likewise in a
``grad_norm_spike`` (or ``grad_norm_drift``); a non-finite step in a ``nonfinite``
finding; a loss-scale change in a ``loss_scale_drop``/``loss_scale_collapse`` finding
when it is a fall, and among the run's ``loss_scale_change`` events either way
(growth is the scaler's normal work and is not a finding); an LR change in an
``lr_change`` finding; restarts by count of ``restart`` findings. Warnings and critical
findings that no label explains are listed as unlabelled alarms.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from logbook.detectors import detect
from logbook.errors import LogbookError

CHECKS = {
    "loss_spikes": ("loss_spike", "divergence"),
    "grad_norm_spikes": ("grad_norm_spike", "grad_norm_drift"),
    "nonfinite": ("nonfinite",),
    "lr_changes": ("lr_change",),
}


def _covered(step: int, findings: list[Any], kinds: tuple[str, ...], tol: int) -> bool:
    for f in findings:
        if f.kind not in kinds:
            continue
        a = f.start_step if f.start_step is not None else f.step
        b = f.end_step if f.end_step is not None else a
        if a is not None and a - tol <= step <= b + tol:
            return True
    return False


def check_file(entry: dict, logs: Path) -> dict:
    """Found/total per label kind, misses and unlabelled alarms of one corpus file."""
    from parsers import read_log

    out: dict[str, Any] = {"file": entry["file"], "found": {}, "misses": [], "alarms": []}
    try:
        run = read_log(logs / entry["file"])
    except (LogbookError, NotImplementedError) as exc:
        out["error"] = str(exc) or type(exc).__name__
        return out
    findings = detect(run)
    steps = run.trajectory().get_column("step")
    tol = int(steps.diff().drop_nulls().median() or 1) if steps.len() > 1 else 1
    used: list[Any] = []
    for key, kinds in CHECKS.items():
        labels = entry.get(key) or []
        hit = [lab for lab in labels if _covered(int(lab["step"]), findings, kinds, tol)]
        out["found"][key] = (len(hit), len(labels))
        out["misses"] += [f"{key} at {lab['step']}" for lab in labels if lab not in hit]
        used += [(int(lab["step"]), kinds) for lab in labels]
    _loss_scale(entry, run, findings, out)
    _restarts(entry, findings, out)
    for f in findings:
        if f.severity == "info" or f.kind in ("restart",):
            continue
        a = f.start_step if f.start_step is not None else f.step
        b = f.end_step if f.end_step is not None else a
        if not any(f.kind in kinds and a - tol <= s <= b + tol for s, kinds in used):
            out["alarms"].append(f"{f.severity} {f.kind} {a}..{b}: {f.message}")
    return out


def _loss_scale(entry: dict, run: Any, findings: list[Any], out: dict) -> None:
    labels = entry.get("loss_scale_changes") or []
    events = {e.step for e in run.events if e.kind == "loss_scale_change"}
    falls = [lab for lab in labels if lab["new"] < lab["old"]]
    in_findings = [
        lab
        for lab in falls
        if _covered(int(lab["step"]), findings, ("loss_scale_drop", "loss_scale_collapse"), 0)
    ]
    as_event = [lab for lab in labels if lab["step"] in events]
    out["found"]["loss_scale_falls (findings)"] = (len(in_findings), len(falls))
    out["found"]["loss_scale_changes (events)"] = (len(as_event), len(labels))
    out["misses"] += [
        f"loss-scale fall at {lab['step']} (no finding)" for lab in falls if lab not in in_findings
    ]
    out["misses"] += [
        f"loss-scale change at {lab['step']} (no event)" for lab in labels if lab not in as_event
    ]


def _restarts(entry: dict, findings: list[Any], out: dict) -> None:
    labels = entry.get("restarts") or []
    got = [f for f in findings if f.kind == "restart"]
    out["found"]["restarts"] = (min(len(got), len(labels)), len(labels))
    if len(got) != len(labels):
        out["misses"].append(f"restarts: {len(got)} found for {len(labels)} labelled")


def corpus_report(corpus: Path) -> str:
    """A Markdown summary of the corpus check."""
    entries = json.loads((corpus / "labels.json").read_text())
    results = [check_file(e, corpus / "logs") for e in entries]
    totals: dict[str, list[int]] = {}
    lines = ["Corpus (hand labels):", ""]
    for r in results:
        for key, (hit, n) in r["found"].items():
            t = totals.setdefault(key, [0, 0])
            t[0] += hit
            t[1] += n
    lines += ["| label | found | labelled |", "|---|---|---|"]
    lines += [f"| {k} | {h} | {n} |" for k, (h, n) in totals.items()]
    lines.append("")
    for r in results:
        notes = [f"parse failed: {r['error']}"] if "error" in r else []
        notes += [f"missed {m}" for m in r["misses"]]
        notes += [f"unlabelled {a}" for a in r["alarms"]]
        if notes:
            lines.append(f"- `{r['file']}`: " + "; ".join(notes))
    return "\n".join(lines)
