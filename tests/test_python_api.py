"""The Python API as the README shows it: read a log, detect, frames, a figure."""

import json
from pathlib import Path

import polars as pl
import pytest

import logbook
from logbook.findings import FRAME_SCHEMA, Findings
from logbook.run import Run

SPIKE = Path(__file__).resolve().parents[1] / "fixtures" / "megatron" / "spike_restart.log"


@pytest.fixture(scope="module")
def run() -> Run:
    return logbook.read_log(SPIKE)


def test_read_log_and_read_logs_from_the_package(run):
    assert isinstance(run, logbook.Run)
    assert (run.metrics.height, run.trajectory().height) == (121, 100)
    (again,) = logbook.read_logs([SPIKE])
    assert again.metrics.equals(run.metrics)


def test_detect_returns_findings_with_a_frame(run):
    found = run.detect()
    assert isinstance(found, Findings) and isinstance(found, list)
    assert [(f.kind, f.severity, f.step) for f in found] == [
        ("lr_change", "info", 76),
        ("restart", "warning", 76),
        ("grad_norm_spike", "critical", 79),
        ("grad_norm_drift", "warning", 83),
        ("overflow_skip", "info", 82),
        ("loss_spike", "critical", 84),
        ("divergence", "critical", 87),
    ]
    assert repr(found) == "Findings(7: 3 critical, 2 warning, 2 info)"
    assert found.worst == "critical"
    assert [f.kind for f in found.at_least("critical")] == [
        "grad_norm_spike",
        "loss_spike",
        "divergence",
    ]
    assert [f.id for f in found.of("loss_spike")] == ["loss_spike@83/seg0"]

    frame = found.to_frame()
    assert frame.columns == list(FRAME_SCHEMA)
    assert frame.height == 7
    row = frame.filter(pl.col("kind") == "grad_norm_spike").row(0, named=True)
    assert (row["start_step"], row["end_step"], row["precedes"], row["lead_steps"]) == (
        77,
        94,
        "loss_spike@83/seg0",
        4,
    )
    assert json.loads(row["evidence"])["metric"] == "grad_norm"
    pandas = frame.to_pandas()
    assert list(pandas["step"]) == [76, 76, 79, 83, 82, 84, 87]
    assert Findings().to_frame().schema == frame.schema
    assert Findings().worst is None
    with pytest.raises(ValueError, match="severity 'bad': use one of info, warning, critical"):
        found.at_least("bad")


def test_detect_takes_thresholds_as_dicts_or_a_file(run, tmp_path):
    strict = run.detect({"loss_spike": {"min_ratio": 5.0}})
    assert "loss_spike" not in [f.kind for f in strict]
    path = tmp_path / "t.toml"
    path.write_text("[loss_spike]\nmin_ratio = 5.0\n")
    assert [f.id for f in run.detect(path)] == [f.id for f in strict]
    from logbook.errors import UsageError

    with pytest.raises(UsageError, match="unknown detector 'nope'"):
        run.detect({"nope": {"x": 1}})


def test_events_frame(run):
    ev = run.events_frame()
    assert ev.columns == [
        "kind",
        "step",
        "segment",
        "time",
        "run",
        "file",
        "line",
        "text",
        "step_source",
        "detail",
    ]
    assert ev.group_by("kind").len().sort("kind").rows() == [
        ("checkpoint_save", 4),
        ("config_change", 1),  # min_lr at the relaunch (its start-up arguments)
        ("hardware_failure", 1),
        ("loss_scale_change", 4),
        ("lr_change", 1),
        ("overflow_skip", 3),
        ("restart", 1),
        ("validation", 2),
    ]
    restart = ev.filter(pl.col("kind") == "restart").row(0, named=True)
    assert restart["step"] == 76
    assert json.loads(restart["detail"])["resume_step"] == 75
    saves = ev.filter(pl.col("kind") == "checkpoint_save")
    assert saves.get_column("step").to_list() == [25, 50, 75, 100]
    assert json.loads(saves.row(0, named=True)["detail"])["path"] == "/ckpt/spike"


def test_plot_shows_the_recomputed_records_and_the_findings(run):
    found = run.detect()
    fig = run.plot(found, metrics=["loss", "grad_norm"])
    assert [ax.get_ylabel() for ax in fig.axes] == ["loss (nats)", "grad norm"]
    lines = {line.get_gid(): len(line.get_xdata()) for line in fig.axes[0].lines}
    # 100 steps of trajectory, and the 21 records the restart at 76 computed again
    assert (lines["main"], lines["other"]) == (100, 21)
    assert "target:critical" in lines
    assert [ax.get_ylabel() for ax in run.plot().axes][0] == "loss (nats)"
