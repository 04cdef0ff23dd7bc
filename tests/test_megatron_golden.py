"""Megatron-LM's functional-test golden values: metric blocks keyed by step, or lists."""

from __future__ import annotations

import json
import math

import pytest

import parsers
from logbook.errors import InputError
from logbook.textio import split_lines
from parsers import megatron_golden


def _parse(data):
    lines, _ = split_lines(json.dumps(data, indent=4).encode())
    return megatron_golden.parse(lines, "golden_values_dev.json"), lines


def test_steps_keyed_with_nan_placeholders_of_a_resumed_job():
    data = {
        "lm loss": {"start_step": 1, "end_step": 4, "step_interval": 1,
                    "values": {"1": "nan", "2": "nan", "3": 9.55, "4": 9.53}},
        "iteration-time": {"start_step": 1, "end_step": 4, "step_interval": 1,
                           "values": {"1": "nan", "2": "nan", "3": "nan", "4": 0.31}},
    }  # fmt: skip
    p, lines = _parse(data)
    # "nan" strings stand for steps the job did not run: no records, no NaN losses
    assert p.metrics.select("step", "loss").rows() == [(3, 9.55), (4, 9.53)]
    assert p.metrics.get_column("iteration_time").to_list() == [None, 0.31]
    # each record at the line of its first value; the other metric's value continues it
    assert p.metrics.get_column("line").to_list() == [9, 10]
    assert p.ignored == lines.height - 3
    assert p.meta["caveats"][1] == '5 value(s) given as "nan": steps the job did not run, left out'


def test_older_files_give_values_as_a_list_from_start_step_every_interval(tmp_path):
    data = {"lm loss": {"start_step": 0, "end_step": 10, "step_interval": 5,
                        "values": [10.8, 10.5, float("nan")]}}  # fmt: skip
    path = tmp_path / "golden_values.json"
    path.write_text(json.dumps(data, indent=4))
    assert parsers.sniff(path) == "megatron-golden"
    (run,) = parsers.read_logs(path)
    assert run.metrics.get_column("step").to_list() == [0, 5, 10]
    loss = run.metrics.get_column("loss").to_list()
    assert loss[:2] == [10.8, 10.5] and math.isnan(loss[2])  # a JSON NaN is a real one
    assert [(e.kind, e.step) for e in run.events_of("nonfinite")] == [("nonfinite", 10)]


def test_bad_files_are_input_errors():
    lines, _ = split_lines(b'{"lm loss": {"start_step": 1, "values": {')
    with pytest.raises(InputError, match="not a readable golden-values file"):
        megatron_golden.parse(lines, "x.json")
    lines, _ = split_lines(b"[]")
    with pytest.raises(InputError, match="no metric blocks"):
        megatron_golden.parse(lines, "x.json")
