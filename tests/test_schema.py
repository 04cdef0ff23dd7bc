from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from logbook.schema import (
    EVENT_MODELS,
    Finding,
    LossScaleChange,
    Restart,
    Source,
    event_from_dict,
    event_to_dict,
)


def test_event_kinds_dispatch_to_their_models():
    e = event_from_dict({"kind": "restart", "step": 101, "resume_step": 80, "cause": "ecc"})
    assert isinstance(e, Restart)
    assert (e.step, e.resume_step, e.cause, e.segment) == (101, 80, "ecc", 0)
    ls = event_from_dict({"kind": "loss_scale_change", "step": 5, "old": 4096.0, "new": 2048.0})
    assert isinstance(ls, LossScaleChange) and ls.new == 2048.0


def test_unknown_kind_with_detector_is_a_finding():
    f = event_from_dict({"kind": "loss_spike", "detector": "loss_spike", "step": 7, "score": 3.5})
    assert isinstance(f, Finding)
    assert (f.kind, f.severity, f.score) == ("loss_spike", "warning", 3.5)


def test_unknown_kind_without_detector_is_rejected():
    with pytest.raises(ValidationError):
        event_from_dict({"kind": "mystery", "step": 1})


def test_extra_fields_are_rejected():
    with pytest.raises(ValidationError) as err:
        event_from_dict({"kind": "restart", "resume": 3})
    assert "resume" in str(err.value)


def test_times_are_normalized_to_utc_and_serialized_with_z():
    e = event_from_dict({"kind": "note", "time": "2021-11-30T10:10:00-08:00", "text": "x"})
    assert e.time == datetime(2021, 11, 30, 18, 10, tzinfo=UTC)
    assert event_to_dict(e)["time"] == "2021-11-30T18:10:00Z"
    naive = event_from_dict({"kind": "note", "time": "2021-11-30T10:10:00.250000"})
    assert event_to_dict(naive)["time"] == "2021-11-30T10:10:00.250000Z"


def test_event_dict_round_trip_for_every_kind():
    required = {"config_change": {"key": "clip"}}
    for kind, model in EVENT_MODELS.items():
        e = model(step=3, source=Source(file="a.log", line=9), **required.get(kind, {}))
        back = event_from_dict(event_to_dict(e))
        assert back == e and type(back) is model
