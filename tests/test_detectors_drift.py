"""The trend detectors (activation_norm_drift & co) and throughput_drop."""

import numpy as np
import polars as pl

from logbook.detectors import DETECTORS, build_context, detect
from logbook.run import Run
from logbook.schema import Restart

ACT = DETECTORS["activation_norm_drift"]
LOGZ = DETECTORS["logz_drift"]
THROUGHPUT = DETECTORS["throughput_drop"]


def wobble(n: int, seed: int, sigma: float = 0.02) -> np.ndarray:
    return np.exp(sigma * np.random.RandomState(seed).standard_t(4, n) / np.sqrt(2))


def run_of(**cols) -> Run:
    n = len(next(iter(cols.values())))
    return Run(metrics=pl.DataFrame({"step": np.arange(1, n + 1), **cols}))


def found(det, run):
    return [(f.kind, f.severity, f.step, f.start_step, f.end_step) for f in det(build_context(run))]


def test_flat_noisy_metric_is_quiet():
    assert found(ACT, run_of(act_norm=25 * wobble(4000, 1))) == []


def test_threefold_rise_exact_onset_and_alarm():
    act = 25 * wobble(4000, 2)
    s = np.arange(1, 4001)
    act *= np.exp(np.log(3.0) * np.clip((s - 2000) / 200, 0, 1))  # 3x over steps 2000..2200
    (f,) = ACT(build_context(run_of(act_norm=act)))
    # onset as the level leaves the baseline; fires once 1.25x is held for 3 records;
    # the norm stays up, so the episode lasts to the last record
    assert (f.kind, f.severity, f.start_step, f.step, f.end_step) == (
        "activation_norm_drift",
        "warning",
        2014,
        2046,
        4000,
    )
    assert 2.9 < f.evidence["ratio"] < 3.2  # 3x, plus the noise of the highest level


def test_small_rise_alone_is_dropped_but_kept_as_precursor():
    s = np.arange(1, 4001)
    act = 25 * wobble(4000, 3) * np.exp(np.log(1.6) * np.clip((s - 2000) / 100, 0, 1))
    quiet_loss = 2.0 * wobble(4000, 4, 0.005)
    assert [f.kind for f in detect(run_of(act_norm=act, loss=quiet_loss))] == []
    loss = quiet_loss.copy()
    loss[2099:2104] *= [2.0, 3.0, 2.0, 1.5, 1.2]  # a loss spike at step 2100
    fs = {f.kind: f for f in detect(run_of(act_norm=act, loss=loss))}
    pre = fs["activation_norm_drift"]
    assert (pre.severity, pre.precedes, pre.lead_steps) == (
        "info",
        "loss_spike@2100",
        2100 - pre.step,
    )
    assert 30 <= pre.lead_steps <= 80
    assert fs["loss_spike"].evidence["precursors"] == [pre.id]


def test_constant_null_single_and_short():
    assert found(ACT, run_of(act_norm=np.full(3000, 25.0))) == []
    assert found(ACT, run_of(act_norm=pl.Series([None] * 100, dtype=pl.Float64))) == []
    assert found(ACT, run_of(act_norm=[25.0])) == []
    assert found(ACT, run_of(act_norm=25 * wobble(15, 5))) == []  # under min_history


def test_logz_is_watched_in_magnitude():
    s = np.arange(1, 3001)
    logz = -2.0 * wobble(3000, 6) * np.exp(np.log(3.0) * np.clip((s - 2000) / 100, 0, 1))
    assert [f.kind for f in LOGZ(build_context(run_of(logz=logz)))] == ["logz_drift"]


def test_rise_in_rewound_steps_is_reported_there():
    a = 25 * wobble(2600, 7)
    s = np.arange(1, 2601)
    a *= np.exp(np.log(3.0) * np.clip((s - 2300) / 100, 0, 1))
    b = 25 * wobble(2000, 8)
    df = pl.DataFrame(
        {
            "step": np.r_[s, np.arange(2001, 4001)],
            "segment": np.r_[np.zeros(2600, int), np.ones(2000, int)],
            "act_norm": np.r_[a, b],
        }
    )
    run = Run(metrics=df, events=[Restart(step=2001, segment=1, resume_step=2000)])
    (f,) = ACT(build_context(run))
    assert (f.segment, f.evidence["superseded"]) == (0, True)
    assert 2300 <= f.start_step < f.step < 2400


def test_throughput_drop_sustained_not_single_or_after_restart():
    t = 1.5 * wobble(3000, 9, 0.02)
    assert found(THROUGHPUT, run_of(step_time_s=t)) == []
    slow = t.copy()
    slow[[500, 900, 1500]] *= 10  # checkpoint saves: single slow records
    assert found(THROUGHPUT, run_of(step_time_s=slow)) == []
    slow[1999:2600] *= 1.5
    assert found(THROUGHPUT, run_of(step_time_s=slow)) == [
        ("throughput_drop", "warning", 2016, 2002, 2609)
    ]


def test_throughput_per_sample_with_batch_ramp():
    t = 1.0 * wobble(3000, 10, 0.01)
    batch = np.where(np.arange(3000) < 1500, 256, 512)
    assert found(THROUGHPUT, run_of(step_time_s=t * batch / 256, batch_size=batch)) == []


def staged_start(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """A run from scratch: the loss falls fast for 80 steps, then slowly; the attention
    logits grow 40x from init meanwhile, in two stages with a pause at steps 35-50."""
    s = np.arange(1, n + 1, dtype=float)
    loss = (2.5 + 3.0 * np.exp(-s / 25.0)) * wobble(n, 3, 0.04)
    logit = 0.15 * np.exp(np.log(5.0) * np.clip(s / 35, 0, 1))
    logit *= np.exp(np.log(8.0) * np.clip((s - 50) / 40, 0, 1))
    return loss, logit * wobble(n, 4)


ATTN = DETECTORS["attn_logit_drift"]


def test_the_initial_growth_of_a_run_from_scratch_is_no_drift():
    loss, logit = staged_start()
    assert found(ATTN, run_of(loss=loss, attn_logit_max=logit)) == []
    # the same curves resumed later on (first step 5001) are a rise from its baseline
    late = Run(
        metrics=pl.DataFrame({"step": np.arange(5001, 5401), "loss": loss, "attn_logit_max": logit})
    )
    assert [k for k, *_ in found(ATTN, late)] == ["attn_logit_drift"]


def test_a_jump_after_the_loss_settled_is_a_drift_from_the_plateau():
    loss, logit = staged_start()
    s = np.arange(1, 401)
    logit *= np.exp(np.log(4.0) * np.clip((s - 250) / 10, 0, 1))  # 4x over steps 250..260
    (f,) = ATTN(build_context(run_of(loss=loss, attn_logit_max=logit)))
    assert (f.severity, f.start_step, f.step, f.end_step) == ("warning", 253, 257, 400)
    assert 5.5 < f.evidence["baseline"] < 6.5  # the plateau (0.15 x 40), not the init
    assert 3.6 < f.evidence["ratio"] < 4.4


def young_run(loss_falls: bool) -> Run:
    """400 steps from scratch: the loss falls from 5.5 to 3.0 by step 60; the attention
    logits rise 2.5x over steps 100..110, while the loss still falls slowly (2.4% per 20
    steps: a model learning) or is flat."""
    s = np.arange(1, 401, dtype=float)
    if loss_falls:
        loss = np.where(s < 60, 5.5 - 2.5 * s / 60, 3.0 - 0.0035 * (s - 60))
    else:
        loss = np.where(s < 60, 5.5 - 2.5 * s / 60, 3.0)
    logit = 10 * np.exp(np.log(2.5) * np.clip((s - 100) / 10, 0, 1))
    return run_of(loss=loss * wobble(400, 5, 0.01), attn_logit_max=logit * wobble(400, 6))


def test_a_rise_while_a_young_run_still_learns_fast_is_no_drift():
    assert found(ATTN, young_run(loss_falls=True)) == []
    (f,) = ATTN(build_context(young_run(loss_falls=False)))
    assert (f.kind, f.severity, f.start_step, f.step) == ("attn_logit_drift", "warning", 104, 108)
    assert 2.3 < f.evidence["ratio"] < 2.7
