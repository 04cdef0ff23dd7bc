"""The registry: documented detectors, and docs/detectors.md generated from them."""

from pathlib import Path

from logbook.detectors import DETECTORS
from logbook.detectors._docs import render

DOCS = Path(__file__).resolve().parents[1] / "docs" / "detectors.md"


def test_every_detector_says_when_it_fires_and_when_it_stays_quiet():
    for name, det in DETECTORS.items():
        assert "Fires" in det.doc or "Reports" in det.doc or "Two rules" in det.doc, name
        assert "Stays quiet on" in det.doc, name
        assert det.kinds, name


def test_every_threshold_has_a_meaning():
    for name, det in DETECTORS.items():
        for field, info in det.config.model_fields.items():
            assert info.description, f"{name}.{field}"
        for key in det.defaults:
            assert key in det.config.model_fields, f"{name}: default for unknown {key}"


def test_docs_file_is_the_generated_reference():
    assert DOCS.read_text() == render()
