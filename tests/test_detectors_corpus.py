"""Detection on the real-log corpus against its hand labels. Skipped when the corpus is
not next to the project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import parsers
from logbook.detectors import detect

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
LABELS_FILE = CORPUS / "labels.json"
pytestmark = pytest.mark.skipif(not LABELS_FILE.is_file(), reason="shared corpus not present")
LABELS = json.loads(LABELS_FILE.read_text()) if LABELS_FILE.is_file() else []
CHECKED = {
    "loss_spikes": ("loss_spike", "divergence"),
    "grad_norm_spikes": ("grad_norm_spike", "grad_norm_drift"),
    "nonfinite": ("nonfinite",),
    "lr_changes": ("lr_change",),
}
# the 8.7x grad norm opens the trajectory of that file: its only earlier values are the
# same steps replayed by other launches (other topologies)
KNOWN_MISSES = {("bigscience_tr11_reshaping_restart_universal_ckpt.txt", "grad_norm_spikes", 94768)}


def _covers(findings, kinds, step: int) -> bool:
    return any(
        f.kind in kinds and f.start_step is not None and f.start_step - 1 <= step <= f.end_step + 1
        for f in findings
    )


@pytest.mark.parametrize(
    "label", [x for x in LABELS if x["progress_records"]], ids=lambda x: x["file"]
)
def test_labelled_incidents_are_found(label):
    findings = detect(parsers.read_log(CORPUS / "logs" / label["file"]))
    for key, kinds in CHECKED.items():
        for item in label.get(key) or []:
            found = _covers(findings, kinds, int(item["step"]))
            assert found != ((label["file"], key, item["step"]) in KNOWN_MISSES), (key, item)
    restarts = [f for f in findings if f.kind == "restart"]
    assert len(restarts) == len(label.get("restarts") or [])
    falls = [x for x in label.get("loss_scale_changes") or [] if x["new"] < x["old"]]
    for fall in falls:
        if fall["step"] > 200:  # earlier: start-up calibration, not a finding by design
            assert _covers(findings, ("loss_scale_collapse", "loss_scale_drop"), fall["step"])


def test_no_alarm_on_logs_without_incidents():
    quiet = [
        x["file"]
        for x in LABELS
        if x["progress_records"]
        and not any(x.get(k) for k in (*CHECKED, "loss_scale_changes", "restarts"))
    ]
    assert len(quiet) >= 8
    for name in quiet:
        alarms = [
            f for f in detect(parsers.read_log(CORPUS / "logs" / name)) if f.severity != "info"
        ]
        assert alarms == [], name
