import math
from datetime import UTC, datetime

import polars as pl
import pytest

from logbook.errors import InputError
from logbook.run import Run, RunMeta
from logbook.schema import Finding, Nonfinite, Restart, Source


def _run() -> Run:
    metrics = pl.DataFrame(
        {
            "step": [1, 2, 3, 2, 3],
            "segment": [0, 0, 0, 1, 1],
            "time": [datetime(2024, 5, 1, 12, 0, s, 123456, tzinfo=UTC) for s in range(5)],
            "line": [10, 11, 12, 20, 21],
            "loss": [2.5, float("nan"), None, 2.25, 0.1 + 0.2],
            "grad_norm": [float("inf"), float("-inf"), 1e-300, 1.0, 2.0],
            "tflops": [100.5, 101.0, 99.0, 98.0, None],
            "label": ["a", None, "c", "d", "e"],
        }
    )
    events = [
        Restart(step=2, segment=1, resume_step=1, last_step_before=3, lost_steps=2, gap_s=1.5),
        Nonfinite(step=2, metric="loss", value="nan", source=Source(file="x.log", line=11)),
        Finding(kind="loss_spike", detector="loss_spike", step=3, score=4.0, precedes=None),
    ]
    meta = RunMeta(name="12.45.2", format="megatron", sources=["x.log"], units={"loss": "nats"})
    return Run(metrics=metrics, events=events, meta=meta)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_round_trip_is_exact(tmp_path, suffix):
    run = _run()
    path = tmp_path / f"run{suffix}"
    run.write(path)
    back = Run.read(path)
    assert back.metrics.equals(run.metrics)
    assert back.metrics.schema == run.metrics.schema
    assert back.events == run.events
    assert back.meta == run.meta


def test_jsonl_writes_nonfinite_as_strings(tmp_path):
    path = tmp_path / "run.jsonl"
    _run().write(path)
    lines = path.read_text().splitlines()
    assert lines[0].startswith('{"type": "run", "schema": "logbook/1"')
    assert '"grad_norm":"Infinity"' in lines[1]
    assert '"loss":"NaN"' in lines[2] and '"grad_norm":"-Infinity"' in lines[2]
    assert sum(1 for x in lines if x.startswith('{"type":"metrics"')) == 5
    assert sum(1 for x in lines if x.startswith('{"type": "event"')) == 3


def test_core_columns_always_present_and_ordered():
    run = Run(metrics=pl.DataFrame({"zeta": [1.0], "loss": [2.0], "step": [5]}))
    assert run.metrics.columns == ["step", "segment", "time", "source", "line", "loss", "zeta"]
    assert run.metrics.schema["step"] == pl.Int64
    assert run.metrics.schema["time"] == pl.Datetime("us", "UTC")


def test_trajectory_keeps_the_last_segment_for_each_step():
    traj = _run().trajectory()
    assert traj.get_column("step").to_list() == [1, 2, 3]
    assert traj.get_column("segment").to_list() == [0, 1, 1]
    assert traj.get_column("line").to_list() == [10, 20, 21]


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "out" / "run.jsonl"
    _run().write(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.jsonl"]


def test_reading_a_file_without_header_is_an_input_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"step": 1}\n')
    with pytest.raises(InputError, match="not a logbook JSONL file"):
        Run.read(path)


def test_bad_event_row_names_its_line(tmp_path):
    path = tmp_path / "run.jsonl"
    _run().write(path)
    with path.open("a") as fh:
        fh.write('{"type": "event", "kind": "restart", "bogus": 1}\n')
    with pytest.raises(InputError, match=r"run.jsonl:10: bad event row"):
        Run.read(path)


def test_a_value_equal_to_the_nan_marker_round_trips_beside_nan(tmp_path):
    m = pl.DataFrame(
        {"step": [1, 2, 3], "segment": [0, 0, 0], "loss": [-7.77e-301, float("nan"), -7.71e-301]}
    )
    out = tmp_path / "x.jsonl"
    Run(metrics=m).write(out)
    back = Run.read(out).metrics.get_column("loss").to_list()
    assert back[0] == -7.77e-301 and math.isnan(back[1]) and back[2] == -7.71e-301
