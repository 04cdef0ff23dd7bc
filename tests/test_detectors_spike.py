"""loss_spike and grad_norm_spike: exact episodes on constructed series."""

import numpy as np
import polars as pl

from logbook.detectors import DETECTORS, build_context, detect
from logbook.run import Run
from logbook.schema import Restart

LOSS = DETECTORS["loss_spike"]
GRAD = DETECTORS["grad_norm_spike"]


def noise(n: int, seed: int, sigma: float) -> np.ndarray:
    """Heavy-tailed noise from numpy's frozen legacy stream."""
    return sigma * np.random.RandomState(seed).standard_t(4, n) / np.sqrt(2)


def descent(n: int, seed: int = 0, sigma: float = 0.01) -> np.ndarray:
    s = np.arange(1, n + 1)
    return (2.0 + 9.0 * (1 + s / 100) ** -0.7) * np.exp(noise(n, seed, sigma))


def run_of(**cols) -> Run:
    n = len(next(iter(cols.values())))
    return Run(metrics=pl.DataFrame({"step": np.arange(1, n + 1), **cols}))


def spikes(det, run: Run):
    return det(build_context(run))


def test_clean_descent_with_heavy_tailed_noise_is_quiet():
    assert spikes(LOSS, run_of(loss=descent(3000))) == []


def test_injected_spike_exact_episode():
    loss = descent(1000)
    loss[499:504] *= [1.5, 3.0, 2.0, 1.4, 1.1]  # steps 500..504
    (f,) = spikes(LOSS, run_of(loss=loss))
    # ends at the first record back within 20% of the excursion: 1.1x at step 504
    assert (f.kind, f.severity, f.step, f.start_step, f.end_step) == (
        "loss_spike",
        "critical",
        500,
        500,
        504,
    )
    assert f.evidence["peak_step"] == 501
    assert f.evidence["recovered"] is True
    assert round(f.evidence["ratio"], 1) == 3.0


def test_small_spike_is_a_warning_and_unrecovered_is_critical():
    loss = descent(1000)
    loss[599:603] *= 1.5
    (f,) = spikes(LOSS, run_of(loss=loss))
    assert (f.severity, f.start_step, f.end_step) == ("warning", 600, 604)
    loss = descent(1000)
    loss[949:] *= 1.6  # still up at the last record
    (f,) = spikes(LOSS, run_of(loss=loss))
    assert (f.severity, f.start_step, f.end_step, f.evidence["recovered"]) == (
        "critical",
        950,
        1000,
        False,
    )


def test_lone_outlier_counts_by_its_ratio_or_by_its_deviations():
    loss = descent(1000)
    loss[499] *= 1.8  # one record, under the 2x bar, but ~60 deviations over a quiet loss
    (f,) = spikes(LOSS, run_of(loss=loss))
    assert (f.severity, f.start_step, f.end_step) == ("warning", 500, 501)
    assert f.evidence["ratio"] > 1.7 and f.score > 8
    off = LOSS.make_config({"lone_z": None})  # only the 2x bar
    assert LOSS(build_context(run_of(loss=loss)), off) == []
    loss[499] *= 1.3  # 2.34x: a lone record that large counts either way
    (f,) = LOSS(build_context(run_of(loss=loss)), off)
    assert (f.start_step, f.end_step) == (500, 501)


def test_lone_outlier_in_noisy_loss_is_ignored():
    loss = descent(1000, sigma=0.08)
    loss[499] = np.median(loss[480:499]) * 1.4  # 1.4x: about 6 deviations of this noise
    found = spikes(LOSS, run_of(loss=loss))
    assert [f.step for f in found] == [302]  # the noise's own 1.59x outlier (10.8 deviations)
    loss[499] = np.median(loss[480:499]) * 1.6  # 8 deviations, 1.38x the highest before it
    assert [f.step for f in spikes(LOSS, run_of(loss=loss))] == [302, 500]


def test_early_rise_held_for_two_records_is_a_spike():
    loss = np.array([10.9, 14.4, 15.2, 11.3, 11.1, 10.2, 9.8, 9.7, 9.3, 9.4] + [9.0] * 20)
    (f,) = spikes(LOSS, run_of(loss=loss))
    assert (f.start_step, f.end_step) == (2, 4)
    assert f.evidence["peak_step"] == 3
    loss[2] = 11.0  # one high record early on is not enough under 2x
    assert spikes(LOSS, run_of(loss=loss)) == []
    assert GRAD.make_config().early_ratio is None  # grad norms jump early: not for them


def test_early_rise_that_dips_then_climbs_on_is_one_spike_from_its_first_record():
    # 11.7 -> 15.6 (x1.33), 14.1 (x1.20), 28.4: one episode from the first rise (a
    # Muon run's first iterations), not a spike at the third record only
    loss = np.array([11.69, 15.56, 14.06, 28.38, 18.9, 15.1, 11.2, 10.9, 10.1] + [9.5] * 30)
    (f,) = spikes(LOSS, run_of(loss=loss))
    assert (f.start_step, f.evidence["peak_step"], f.end_step) == (2, 4, 7)
    assert f.severity == "critical" and round(f.evidence["ratio"], 2) == 2.43
    # a rise that falls back under 1.3x for two records is not held
    loss[3] = 13.0
    assert spikes(LOSS, run_of(loss=loss)) == []


def test_constant_null_and_single_record():
    assert spikes(LOSS, run_of(loss=np.full(500, 2.5))) == []
    assert spikes(LOSS, run_of(loss=pl.Series([None] * 300, dtype=pl.Float64))) == []
    assert spikes(LOSS, run_of(loss=[3.0])) == []
    assert spikes(LOSS, Run()) == []


def test_short_history_needs_a_doubling():
    # a log that starts with the spike: three records, the third 2.2x the first two
    assert [f.start_step for f in spikes(LOSS, run_of(loss=[12.1, 12.0, 26.5, 13.0]))] == [3]
    assert spikes(LOSS, run_of(loss=[12.1, 12.0, 18.0, 13.0])) == []


def _restarted(loss_a, loss_b, resume):
    n_a, n_b = len(loss_a), len(loss_b)
    df = pl.DataFrame(
        {
            "step": np.r_[np.arange(1, n_a + 1), np.arange(resume + 1, resume + n_b + 1)],
            "segment": np.r_[np.zeros(n_a, int), np.ones(n_b, int)],
            "loss": np.r_[loss_a, loss_b],
        }
    )
    restart = Restart(step=resume + 1, segment=1, resume_step=resume)
    return Run(metrics=df, events=[restart])


def test_restart_bump_is_not_a_spike_but_the_rewound_spike_is_found():
    full = descent(1500, seed=1)
    a = full[:700].copy()
    a[649:653] *= [2.0, 2.6, 2.0, 1.5]  # steps 650..653, then the team rewinds to 600
    b = descent(1500, seed=2)[600:1500]
    b[:3] *= [1.06, 1.04, 1.02]  # the first records after the relaunch are a bit off
    found = spikes(LOSS, _restarted(a, b, 600))
    assert [(f.start_step, f.segment, f.evidence.get("superseded")) for f in found] == [
        (650, 0, True)
    ]
    assert "recomputed after a restart" in found[0].message


def test_level_shift_at_relaunch_is_not_a_spike():
    a = descent(600, seed=3)
    b = descent(1200, seed=4)[600:] * 1.8  # new level from the first record on
    assert spikes(LOSS, _restarted(a, b, 600)) == []


def test_grad_norm_spike_exact_and_quiet_on_wobble():
    g = 0.3 * np.exp(noise(1000, 5, 0.15))
    assert spikes(GRAD, run_of(grad_norm=g)) == []
    g[299:303] *= [4.0, 12.0, 6.0, 2.0]
    (f,) = spikes(GRAD, run_of(grad_norm=g))
    assert (f.kind, f.start_step, f.evidence["peak_step"], f.severity) == (
        "grad_norm_spike",
        300,
        301,
        "warning",
    )


def test_grad_norm_printed_as_zero_is_not_measured():
    assert spikes(GRAD, run_of(grad_norm=np.zeros(200))) == []


def test_detect_is_deterministic():
    loss = descent(800)
    loss[399:402] *= [2.0, 2.5, 1.5]
    run = run_of(loss=loss, grad_norm=0.3 * np.exp(noise(800, 6, 0.1)))
    a = [f.model_dump() for f in detect(run)]
    b = [f.model_dump() for f in detect(run)]
    assert a == b and [f["id"] for f in a] == ["loss_spike@400"]


def test_a_new_level_after_a_gap_in_the_log_is_not_a_spike():
    # a note's excerpt: steps 1-3, ``...``, 2498-2500 (the scale stuck at 1, the loss
    # higher than at the start): nothing to judge the records after the gap by
    steps = [1, 2, 3, 2498, 2499, 2500]
    loss = [10.65, 10.64, 10.66, 12.67, 13.40, 12.55]
    run = Run(metrics=pl.DataFrame({"step": steps, "loss": loss}))
    assert spikes(LOSS, run) == []
    # without the gap the same values rise 1.26x over a quiet baseline, and stay up
    run = Run(metrics=pl.DataFrame({"step": [1, 2, 3, 4, 5, 6], "loss": loss}))
    (f,) = spikes(LOSS, run)
    assert (f.start_step, f.step, f.severity) == (4, 5, "critical")


def test_gap_age_counts_records_since_the_last_gap():
    from logbook.detectors._frame import NO_RESTART
    from logbook.detectors._spike import gap_age

    step = np.array([10, 20, 30, 5000, 5010, 5020, 40, 50])
    lineage = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    far = NO_RESTART
    assert gap_age(step, lineage).tolist() == [far, far, far, 0, 1, 2, far, far]


def test_a_signed_loss_is_not_judged_by_ratios():
    # a GRPO loss around zero: 0.0001 -> 0.0008 is "8x" of nothing
    loss = [-0.0784, 0.0001, -0.02, 0.0003, 0.0001, 0.0001, 0.0008, 0.0002, -0.01, 0.0001]
    run = Run(metrics=pl.DataFrame({"step": list(range(25, 275, 25)), "loss": loss}))
    assert [f for f in detect(run) if f.kind in ("loss_spike", "divergence")] == []


def _noisy(n: int, seed: int) -> np.ndarray:
    """A per-batch loss of a small batch: a spread of about 40% around its level."""
    return 1.0 * np.exp(0.4 * np.random.RandomState(seed).standard_normal(n))


def test_a_loss_noisy_throughout_is_judged_by_its_own_spread():
    # two-fold swings are this series' noise: none is a spike
    for seed in range(5):
        found = [f for f in spikes(LOSS, run_of(loss=_noisy(300, seed))) if f.severity != "info"]
        assert found == [], (seed, [f.message for f in found])


def test_a_spike_far_above_a_noisy_loss_still_fires():
    loss = _noisy(300, 0)
    loss[200:204] = 12.0  # twelve times the level for four records
    (f,) = [f for f in spikes(LOSS, run_of(loss=loss)) if f.severity != "info"]
    assert (f.start_step, f.severity) == (201, "critical")
