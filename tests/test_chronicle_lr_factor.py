"""Learning-rate changes written as a ratio get the ratio as ``factor`` (new / old)."""

from __future__ import annotations

import pytest

from logbook.detectors import lr_change
from logbook.schema import LrChange
from parsers.chronicle.config import lr_changes


@pytest.mark.parametrize(
    ("text", "factor"),
    [
        ("we lowered our learning rate by 10%, which helped", 0.9),
        ("the LR was reduced by 33% after the spike", 0.67),
        ("raised lr by 20% for the last stretch", 1.2),
        ("cut the learning rate by 2x", 0.5),
        ("decreased the lr by a factor of 4", 0.25),
        ("lowered the learning rate to 2/3 of what GPT-3 used", 0.666667),
        ("dropped the LR to half", 0.5),
        ("halved the learning rate", 0.5),
        ("doubled the LR", 2.0),
    ],
)
def test_ratio_phrases(text: str, factor: float) -> None:
    (found,) = lr_changes(text, entry=True)
    assert found.fields == {"manual": True, "factor": factor}


@pytest.mark.parametrize(
    "text",
    [
        "halving lr from 6e-5 to 3e-5",  # both values: new / old says it
        "lowered the lr to 3e-5",  # the new value only
    ],
)
def test_no_factor_where_values_are_given(text: str) -> None:
    (found,) = lr_changes(text, entry=True)
    assert "factor" not in found.fields


def test_no_factor_without_a_direction() -> None:
    assert lr_changes("the lr by 10% of its peak", entry=False) == []


def test_the_detector_reports_the_factor() -> None:
    e = LrChange(step=100, manual=True, factor=0.9)
    f = lr_change._from_event(e)
    assert (f.step, f.severity, f.evidence["ratio"]) == (100, "info", 0.9)
    assert f.message == "learning rate x0.9 at step 100 (from the log)"
