"""Detection on the hand-labelled real excerpts of ``fixtures/real/``.

    python -m bench.eval_real [--list]

Per labelled kind (loss spikes, non-finite steps, restarts, LR changes, crashes): how many
show among the run's events and findings (see ``bench._real_labels.shown``); then the
loss-spike findings of warning or critical severity that no labelled spike, non-finite
step or restart accounts for. ``--list`` names every miss and every such finding.
"""

from __future__ import annotations

import json
import sys

import parsers
from bench._real_labels import LABELS, SHOWN_BY, crash_shown, input_of, key_of, shown
from logbook.detectors import detect
from logbook.errors import InputError


def evaluate() -> tuple[dict[str, list[int]], list[str], list[str]]:
    """({kind: [labelled, shown]}, misses, unlabelled spike findings)."""
    tally: dict[str, list[int]] = {k: [0, 0] for k in (*SHOWN_BY, "crash")}
    misses: list[str] = []
    extra: list[str] = []
    for label in LABELS:
        want = json.loads(label.read_text())
        try:
            runs = parsers.read_logs(input_of(label))
        except InputError:
            runs = []
        found = [f for r in runs for f in detect(r)]
        events = [e for r in runs for e in r.events] + found
        for kind, kinds in SHOWN_BY.items():
            for step in want.get(kind) or []:
                ok = shown(step, kinds, events)
                tally[kind][0] += 1
                tally[kind][1] += ok
                if not ok:
                    misses.append(f"{key_of(label)}: {kind} at {step}")
        if want.get("crash"):
            ok = crash_shown(found)
            tally["crash"][0] += 1
            tally["crash"][1] += ok
            if not ok:
                misses.append(f"{key_of(label)}: crash")
        told = [*(want.get("loss_spikes") or []), *(want.get("nonfinite") or [])]
        told += want.get("restarts") or []
        for f in found:
            if f.kind != "loss_spike" or f.severity == "info":
                continue
            lo, hi = f.start_step, f.end_step
            if lo is None or hi is None or not any(lo - 1 <= s <= hi + 1 for s in told):
                extra.append(f"{key_of(label)}: {f.severity} {f.message}")
    return tally, misses, extra


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    tally, misses, extra = evaluate()
    print(f"{len(LABELS)} labelled excerpts in fixtures/real/\n")
    print("| label | shown | labelled |\n|---|---|---|")
    for kind, (n, ok) in tally.items():
        print(f"| {kind} | {ok} | {n} |")
    print(f"\nloss-spike findings no label accounts for: {len(extra)}")
    if "--list" in args:
        print("\nmisses:\n" + "\n".join(f"- {m}" for m in misses))
        print("\nunlabelled loss-spike findings:\n" + "\n".join(f"- {x}" for x in extra))


if __name__ == "__main__":
    main()
