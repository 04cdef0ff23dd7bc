from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from logbook.report.summary import log_interval, summarize, unit_notes
from logbook.run import Run, RunMeta
from logbook.schema import Finding, Note

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "incident_run.jsonl"


def test_fixture_summary():
    run = Run.read(FIXTURE)
    f = Finding(kind="loss_spike", detector="loss_spike", severity="critical", step=5)
    s = summarize(run, [f])
    assert (s.name, s.formats, s.sources) == ("incident-demo", "megatron", ["incident_run.jsonl"])
    assert (s.records, s.trajectory_steps, s.segments) == (1600, 1450, 3)
    assert (s.first_step, s.last_step, s.interval) == (1, 1450, 1)
    assert (s.samples, s.tokens) == (1450 * 256, 1450 * 256 * 2048)
    assert s.start == datetime(2024, 1, 1, tzinfo=UTC)
    assert s.wall_s == 5444.0
    assert s.findings == {"critical": 1, "warning": 0, "info": 0}
    assert s.events == {
        "checkpoint_save": 15,
        "hardware_failure": 1,
        "loss_scale_change": 6,
        "lr_change": 1,
        "note": 1,
        "restart": 2,
    }
    assert s.warnings == []


def _run(steps, loss=None, times=True, caveats=(), units=None) -> Run:
    n = len(steps)
    t0 = datetime(2024, 2, 1, tzinfo=UTC)
    data = {"step": steps, "segment": [0] * n}
    if loss is not False:
        data["loss"] = loss if loss is not None else [2.0] * n
    if times:
        data["time"] = [t0 + timedelta(seconds=int(s)) for s in steps]
    meta = RunMeta(caveats=list(caveats), units=units or {})
    return Run(metrics=pl.DataFrame(data), events=[Note(step=1, text="x")], meta=meta)


def test_sparse_logging_interval_is_warned():
    s = summarize(_run(list(range(100, 10_001, 100))), [])
    assert s.interval == 100
    assert s.warnings == [
        "one record every 100 steps: a spike shorter than that can fall between records, and "
        "a loss printed as an average over the interval (Megatron) dilutes it"
    ]


def test_irregular_spacing_is_warned():
    rng = np.random.default_rng(3)
    steps = np.cumsum(rng.integers(1, 9, 60)).tolist()
    s = summarize(_run(steps), [])
    assert len(s.warnings) == 1
    assert s.warnings[0].startswith("irregular step spacing (only ")
    assert "reservoir-sampled TensorBoard scalars" in s.warnings[0]


def test_missing_losses_no_timestamps_and_caveats():
    loss = [2.0, None, 2.0, None, 2.0]
    caveat = "loss is averaged over the logging window (Hugging Face Trainer)"
    s = summarize(_run([1, 2, 3, 4, 5], loss=loss, times=False, caveats=[caveat]), [])
    assert s.warnings == [
        "2 record(s) without a loss value (NaN steps that the log left out, or "
        "overflow-skipped intervals)",
        "no timestamps: wall time and goodput are estimated from the step times",
        caveat,
    ]
    assert s.wall_s is None and s.start is None


def test_no_loss_column():
    s = summarize(_run([1, 2, 3], loss=False), [])
    assert s.warnings == ["no loss values in the log: loss spikes and divergence cannot be seen"]


def test_units_and_degenerate_runs():
    assert unit_notes({"loss": "bits -> nats (x ln 2)", "lr": "as logged"}) == [
        "loss converted from bits to nats (x ln 2)",
        "lr: as logged",
    ]
    empty = summarize(Run(), [])
    assert (empty.records, empty.first_step, empty.interval, empty.segments) == (0, None, None, 0)
    assert log_interval(pl.DataFrame({"step": [7]})) is None
