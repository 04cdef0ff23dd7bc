"""nonfinite and divergence: NaN/Inf values, missing losses, non-finite to the end."""

import numpy as np
import polars as pl

from logbook.detectors import DETECTORS, build_context
from logbook.run import Run
from logbook.schema import Nonfinite, OverflowSkip, Restart

NONFINITE = DETECTORS["nonfinite"]
DIVERGENCE = DETECTORS["divergence"]


def run_of(events=(), **cols) -> Run:
    n = len(next(iter(cols.values())))
    return Run(metrics=pl.DataFrame({"step": np.arange(1, n + 1), **cols}), events=list(events))


def found(det, run):
    return [(f.kind, f.severity, f.start_step, f.end_step) for f in det(build_context(run))]


def flat(n=100):
    return np.linspace(3.0, 2.5, n)


def test_clean_constant_null_single():
    assert found(NONFINITE, run_of(loss=flat())) == []
    assert found(NONFINITE, run_of(loss=np.full(50, 2.0))) == []
    assert found(NONFINITE, run_of(loss=pl.Series([None] * 50, dtype=pl.Float64))) == []
    assert found(NONFINITE, run_of(loss=[float("nan")])) == [("nonfinite", "critical", 1, 1)]


def test_values_grouped_into_episodes():
    loss = flat()
    loss[[9, 40, 41, 42]] = [np.inf, np.nan, np.nan, -np.inf]
    grad = np.ones(100)
    grad[41] = np.nan
    fs = NONFINITE(build_context(run_of(loss=loss, grad_norm=grad)))
    assert [(f.start_step, f.end_step, f.evidence["records"]) for f in fs] == [
        (10, 10, 1),
        (41, 43, 3),
    ]
    assert fs[0].evidence["values"] == ["inf"]
    assert fs[1].evidence["metrics"] == ["loss", "grad_norm"]
    assert fs[1].evidence["values"] == ["nan", "-inf"]


def test_missing_loss_from_events_and_overflow_skips_are_info():
    loss = pl.Series(flat().tolist(), dtype=pl.Float64).scatter([19, 29], None)
    events = [
        Nonfinite(step=20, metric="loss", value="missing"),
        Nonfinite(step=30, metric="loss", value="missing"),
        OverflowSkip(step=30),
    ]
    assert found(NONFINITE, run_of(events, loss=loss)) == [
        ("nonfinite", "critical", 20, 20),
        ("nonfinite", "info", 30, 30),
    ]


def test_null_without_event_is_not_nonfinite():
    loss = pl.Series(flat().tolist(), dtype=pl.Float64).scatter([5, 6], None)
    assert found(NONFINITE, run_of(loss=loss)) == []


def test_nan_in_a_rewound_segment_is_reported_with_its_segment():
    df = pl.DataFrame(
        {
            "step": np.r_[np.arange(1, 61), np.arange(41, 101)],
            "segment": np.r_[np.zeros(60, int), np.ones(60, int)],
            "loss": np.r_[flat(60), flat(60)],
        }
    ).with_columns(
        pl.when((pl.col("segment") == 0) & (pl.col("step") >= 55))
        .then(float("nan"))
        .otherwise(pl.col("loss"))
        .alias("loss")
    )
    run = Run(metrics=df, events=[Restart(step=41, segment=1, resume_step=40)])
    fs = NONFINITE(build_context(run))
    assert [(f.start_step, f.end_step, f.segment) for f in fs] == [(55, 60, 0)]
    (d,) = DIVERGENCE(build_context(run))  # NaN until the rewind: a divergence too
    assert (d.start_step, d.end_step, d.segment, d.evidence["rule"]) == (55, 60, 0, "nonfinite")
    assert d.evidence["superseded"] is True


def test_divergence_rising_to_the_end():
    loss = flat(300)
    loss[200:] *= np.linspace(1.0, 2.0, 100)
    (d,) = DIVERGENCE(build_context(run_of(loss=loss)))
    assert (d.kind, d.severity, d.evidence["rule"], d.end_step) == (
        "divergence",
        "critical",
        "rising",
        300,
    )
    # onset where the level passes half the rise (1.15x), alarm where it passes 1.3x
    assert (d.start_step, d.step) == (221, 237)


def test_divergence_quiet_on_recovered_spike_constant_null_single():
    loss = flat(300)
    loss[150:160] *= 2.0
    assert found(DIVERGENCE, run_of(loss=loss)) == []
    assert found(DIVERGENCE, run_of(loss=np.full(300, 2.0))) == []
    assert found(DIVERGENCE, run_of(loss=pl.Series([None] * 30, dtype=pl.Float64))) == []
    assert found(DIVERGENCE, run_of(loss=[2.0])) == []


def test_missing_loss_at_the_end_from_skipped_iterations_is_not_divergence():
    loss = pl.Series(flat(50).tolist(), dtype=pl.Float64).scatter([49], None)
    events = [Nonfinite(step=50, metric="loss", value="missing"), OverflowSkip(step=50)]
    assert found(DIVERGENCE, run_of(events, loss=loss)) == []
    events = events[:1]  # no skip: the loss vanished (Megatron's NaN record)
    assert found(DIVERGENCE, run_of(events, loss=loss)) == [("divergence", "critical", 50, 50)]


def test_the_parts_of_a_loss_printed_without_a_total_are_watched():
    # mmseg prints ``decode.loss_seg`` and no ``loss``: a NaN there is a NaN loss
    parts = np.r_[np.full(5, 0.7), [np.nan, np.nan], np.full(5, 0.6)]
    run = run_of(decode_loss_seg=parts, decode_acc_seg=np.full(12, 40.0))
    assert found(NONFINITE, run) == [("nonfinite", "critical", 6, 7)]
    (f,) = NONFINITE(build_context(run))
    assert "decode_loss_seg" in f.message
    # a column without ``loss`` in its name stays unwatched
    run = run_of(loss=flat(12), decode_acc_seg=np.r_[np.full(11, 40.0), [np.nan]])
    assert found(NONFINITE, run) == []
