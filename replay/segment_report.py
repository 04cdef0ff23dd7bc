"""The report of ``logbook replay segment``: the mapping, the actions, the outcome table."""

from __future__ import annotations

from pathlib import Path

from logbook.atomic import atomic_open
from logbook.run import Run
from replay.experiment import Outcome, outcome_dicts
from replay.fidelity import Fidelity, check
from replay.report import figure, per_run_table, summary_table
from replay.segment import SegmentPlan
from replay.segment_run import NO_ACTIONS, RECORDED


def verdict(outcomes: list[Outcome], warmup: int = 0) -> list[str]:
    """One line per variant: did the small model go unstable under it?"""
    lines = []
    for variant in dict.fromkeys(o.variant for o in outcomes):
        group = [o for o in outcomes if o.variant == variant]
        bad = [o for o in group if o.spike]
        what = {RECORDED: "under the recorded actions", NO_ACTIONS: "without them"}.get(
            variant, f"under {variant}"
        )
        if bad:
            steps = ", ".join(str(o.spike_step) for o in bad)
            early = any(o.spike_step <= warmup for o in bad)
            note = f" (at or before the end of the warm-up, step {warmup})" if early else ""
            lines.append(
                f"unstable {what}: {len(bad)}/{len(group)} seed(s), spike at small step "
                f"{steps}{note}"
            )
        else:
            lines.append(f"stable {what}: 0/{len(group)} seed(s) spiked")
    return lines


def render(
    seg: SegmentPlan, outcomes: list[Outcome], logs: list[str], fid: Fidelity | None = None
) -> str:
    if not seg.recorded_peak_lr:
        peak = "unknown"
    elif seg.peak_configured:
        peak = (
            f"{seg.recorded_peak_lr:.4g} (the run's configured peak, from its start-up arguments)"
        )
    else:
        peak = (
            f"{seg.recorded_peak_lr:.4g} (the largest LR in the log: the run's configured "
            "peak is not in it, so an excerpt inside the warm-up maps to the small model's peak)"
        )
    head = [
        f"# replay segment: recorded steps {seg.start}..{seg.end} of {', '.join(logs)}",
        "",
        f"small model: {seg.warmup} warm-up steps, then the segment on small steps "
        f"{seg.warmup + 1}..{seg.total}; recorded peak LR {peak} -> small-model LR "
        f"{seg.peak_lr:g}; {len(seg.legs)} launch(es) in the window",
        *([f"schedule: {seg.phase}"] if seg.phase else []),
        "",
        "recorded actions carried over:",
    ]
    head += [f"- {a}" for a in seg.actions]
    if not seg.actions:
        head.append("- none (no relaunch, LR jump, clip change or skipped range)")
    if not seg.carried:
        head.append(
            "warning: the log gives nothing the small model can take over (no learning "
            "rate, relaunch, LR change, clip change or skipped range): its run is the small "
            "model's own, not a replay of this segment"
        )
    tables = [summary_table(outcomes), "", per_run_table(outcomes)]
    said = fid.lines if fid is not None else []
    verdicts = verdict(outcomes, seg.warmup)
    if fid is not None and fid.real_step is not None and not fid.reproduced:
        verdicts = []
    body = ["", *said, *([""] if said and verdicts else []), *verdicts, "", *tables]
    return "\n".join(head + body) + "\n"


def write_segment_report(
    seg: SegmentPlan,
    outcomes: list[Outcome],
    out: Path | None,
    logs: list[str],
    run: Run | None = None,
) -> str:
    """The report text (with the fidelity check against ``run``, the real run, when
    given); with ``out``, also ``table.md``, ``results.json``, ``fidelity.json`` and the
    figure."""
    fid = check(seg, run, outcomes, RECORDED) if run is not None else None
    text = render(seg, outcomes, logs, fid)
    if out is not None:
        import json

        with atomic_open(out / "table.md", "w") as fh:
            fh.write(text)
        with atomic_open(out / "results.json", "w") as fh:
            fh.write(json.dumps(outcome_dicts(outcomes), indent=1) + "\n")
        if fid is not None:
            with atomic_open(out / "fidelity.json", "w") as fh:
                fh.write(json.dumps(fid.to_dict(), indent=1) + "\n")
        figure(outcomes, out, seg.warmup, seg.total, f"segment {seg.start}..{seg.end}")
        text += f"wrote {out / 'table.md'}, {out / 'results.json'}, {out / 'comparison.png'}\n"
    return text
