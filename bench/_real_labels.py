"""The hand-labelled real excerpts of ``fixtures/real/``: where each input is, and whether
a labelled incident shows among a run's events and findings (shared by the test that
holds them to their labels and by ``bench.eval_real``)."""

from __future__ import annotations

from pathlib import Path

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
LABELS = sorted(REAL.glob("*/*.labels.json"))

# labelled incident -> the event or finding kinds that show it
SHOWN_BY = {
    "restarts": ("restart",),
    "nonfinite": ("nonfinite", "overflow_skip"),
    "loss_spikes": ("loss_spike", "divergence"),
    "lr_changes": ("lr_change",),
}


def input_of(label: Path) -> Path:
    """The excerpt a labels file describes (same stem, another suffix)."""
    stem = label.name.removesuffix(".labels.json")
    found = [p for p in label.parent.iterdir() if p.name.startswith(stem + ".") and p != label]
    assert len(found) == 1, found
    return found[0]


def key_of(label: Path) -> str:
    return f"{label.parent.name}/{label.name.removesuffix('.labels.json')}"


def shown(step: int, kinds: tuple[str, ...], events: list) -> bool:
    """An event of those kinds at the step (one record either way), or a finding whose
    span covers it; a restart shows the step it resumes at."""
    for e in events:
        if e.kind not in kinds:
            continue
        lo, hi = getattr(e, "start_step", None), getattr(e, "end_step", None)
        if lo is not None and hi is not None and lo - 1 <= step <= hi + 1:
            return True
        at = [x for x in (e.step, getattr(e, "resume_step", None)) if x is not None]
        if any(abs(x - step) <= 1 for x in at):
            return True
        if e.kind == "restart" and any(abs(x + 1 - step) <= 1 for x in at):
            return True
    return False


def crash_shown(events: list) -> bool:
    """A ``crash`` finding, or a restart finding that names the crash that caused it."""
    return any(
        e.kind == "crash"
        or (e.kind == "restart" and (getattr(e, "evidence", None) or {}).get("cause"))
        for e in events
    )
