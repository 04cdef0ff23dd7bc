"""The real-log corpus (all formats) against its hand labels: records, first and last
step (in file order), and every labelled restart, non-finite step and loss-scale change
present as an event at its step. Skipped when the corpus is not next to the project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import parsers

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
LABELS_FILE = CORPUS / "labels.json"
pytestmark = pytest.mark.skipif(not LABELS_FILE.is_file(), reason="shared corpus not present")
LABELS = json.loads(LABELS_FILE.read_text()) if LABELS_FILE.is_file() else []
WITH_RECORDS = [x for x in LABELS if x["format"] != "other" and x["progress_records"]]
WITHOUT = [x for x in LABELS if x not in WITH_RECORDS]
CHECKED = (
    ("restart", "restarts", "resume_step"),
    ("nonfinite", "nonfinite", "step"),
    ("loss_scale_change", "loss_scale_changes", "step"),
)


def _steps_of(run, kind: str) -> set[int]:
    out: set[int] = set()
    for e in run.events_of(kind):
        out.update(v for v in (e.step, getattr(e, "resume_step", None)) if isinstance(v, int))
    return out


@pytest.mark.parametrize("label", WITH_RECORDS, ids=lambda x: x["file"])
def test_records_and_first_last_step_match_the_labels(label):
    run = parsers.read_log(CORPUS / "logs" / label["file"])
    steps = run.metrics.get_column("step").to_list()
    want = (label["progress_records"], label["first_step"], label["last_step"])
    assert (len(steps), steps[0], steps[-1]) == want


@pytest.mark.parametrize("label", WITH_RECORDS, ids=lambda x: x["file"])
def test_labelled_events_are_present(label):
    run = parsers.read_log(CORPUS / "logs" / label["file"])
    missing = []
    for kind, field, key in CHECKED:
        have = _steps_of(run, kind)
        wanted = [x[key] for x in label[field] if isinstance(x.get(key), int)]
        missing += [f"{kind}@{s}" for s in wanted if s not in have]
    assert missing == []


@pytest.mark.parametrize("label", WITHOUT, ids=lambda x: x["file"])
def test_logs_without_training_records_parse_to_none(label):
    run = parsers.read_log(CORPUS / "logs" / label["file"])
    assert run.metrics.height == 0
