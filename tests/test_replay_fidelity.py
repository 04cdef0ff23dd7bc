"""`replay segment`'s fidelity check: verdicts only when the small model reproduces the
real run's instability at the same relative position of the segment."""

import numpy as np
import polars as pl
import pytest

from logbook.run import Run

pytest.importorskip("torch")

from replay.experiment import Outcome  # noqa: E402
from replay.fidelity import check  # noqa: E402
from replay.segment import plan_segment  # noqa: E402
from replay.segment_report import render  # noqa: E402


def real_run(spike_at: int | None) -> Run:
    """Steps 1000..1999 at a flat LR; a loss of 2.0 (with a little noise) that jumps to
    6.0 for five steps at ``spike_at``."""
    steps = np.arange(1000, 2000)
    loss = 2.0 + 0.01 * np.sin(steps * 0.7)
    if spike_at is not None:
        loss[spike_at - 1000 : spike_at - 995] = 6.0
    return Run(metrics=pl.DataFrame({"step": steps, "loss": loss, "lr": np.full(1000, 3e-4)}))


def outcome(variant: str, seed: int, spike_step: int | None) -> Outcome:
    return Outcome(
        variant=variant,
        seed=seed,
        final_loss=2.5,
        max_loss=6.0 if spike_step else 2.6,
        spike=spike_step is not None,
        spike_step=spike_step,
        precursors=[],
        max_attn_logit=10.0,
        steps_lost=0,
        run_file="",
    )


@pytest.fixture
def seg():
    # recorded 1000..1999 on 100 small steps after 20 warm-up steps: 1500 -> small step 70
    return plan_segment(real_run(None), 1000, 1999, steps=100, warmup=20, peak_lr=0.1)


def test_a_spike_at_the_same_relative_position_is_reproduced(seg):
    run = real_run(1500)
    outs = [outcome("recorded", 0, 75), outcome("recorded", 1, 64), outcome("half_lr", 0, None)]
    fid = check(seg, run, outs, "recorded")
    assert (fid.real_step, fid.real_kind, fid.real_small) == (1500, "loss_spike", 70)
    assert fid.small_steps == [75, 64] and fid.reproduced
    text = render(seg, outs, ["real.log"], fid)
    assert "fidelity: reproduced: the real run's loss_spike at step 1500 (49% into the " in text
    assert "stable under half_lr: 0/1 seed(s) spiked" in text


def test_no_verdicts_when_the_small_model_spikes_elsewhere_or_not_at_all(seg):
    run = real_run(1500)
    far = [outcome("recorded", 0, 95), outcome("half_lr", 0, None)]
    fid = check(seg, run, far, "recorded")
    assert not fid.reproduced and fid.small_steps == [95]
    assert fid.lines[0].endswith("spikes elsewhere: small step 95 (74% into the segment)")
    text = render(seg, far, ["real.log"], fid)
    assert "no counterfactual verdicts" in text and "stable under half_lr" not in text
    # a spike inside the warm-up is not the segment's
    calm = [outcome("recorded", 0, 12), outcome("recorded", 1, None)]
    fid = check(seg, run, calm, "recorded")
    assert fid.small_steps == [None, None] and not fid.reproduced
    assert fid.lines[0].endswith("stays stable in 2/2 seed(s)")


def test_a_real_segment_without_instability_has_nothing_to_reproduce(seg):
    fid = check(seg, real_run(None), [outcome("recorded", 0, None)], "recorded")
    assert fid.real_step is None and not fid.reproduced
    assert fid.lines == [
        "fidelity: the real run shows no loss spike, divergence, non-finite loss or loss-scale "
        "collapse in steps 1000..1999: there is nothing to reproduce, and the lines below "
        "say only whether the small model stays stable under each variant"
    ]
    text = render(seg, [outcome("recorded", 0, None)], ["real.log"], fid)
    assert "stable under the recorded actions: 0/1 seed(s) spiked" in text


def test_a_log_with_nothing_to_map_is_warned_about():
    run = Run(metrics=pl.DataFrame({"step": np.arange(1, 101), "loss": np.full(100, 2.0)}))
    seg = plan_segment(run, 1, 100, steps=50, warmup=10, peak_lr=0.1)
    assert not seg.carried
    text = render(seg, [outcome("recorded", 0, None)], ["x.log"])
    assert "warning: the log gives nothing the small model can take over" in text


def test_calibration_picks_the_lr_that_puts_the_spike_nearest_the_real_one(monkeypatch):
    from replay import calibrate as cal
    from replay.config import tiny

    # small step of the recorded run's spike per small-model LR (None: stable)
    spikes = {0.01: None, 0.1: 95, 0.3: 74, 1.0: 66}

    def fake_pool(fn, jobs, workers, ray=None):
        assert [j.variant for j in jobs] == ["recorded"] * len(spikes)
        return [outcome("recorded", j.seed, spikes[j.plan.peak_lr]) for j in jobs]

    monkeypatch.setattr(cal, "pool_map", fake_pool)
    run = real_run(1500)
    c = cal.calibrate(run, 1000, 1999, tiny(), 100, 20, tuple(spikes))
    # 74 and 66 are both 4 from the real spike's 70: the lower LR wins the tie
    assert c.real == (1500, "loss_spike") and c.chosen == 0.3
    lines = c.lines()
    assert lines[4:8] == ["| 0.01 | - | no |", "| 0.1 | 95 | no |", "| 0.3 | 74 | yes |",
                          "| 1 | 66 | yes |"]  # fmt: skip
    assert lines[-1] == "calibration: chose small-model LR 0.3"
    spikes.update({0.3: None, 1.0: 12})
    c = cal.calibrate(run, 1000, 1999, tiny(), 100, 20, tuple(spikes))
    assert c.lines()[7] == "| 1 | 12 (warm-up) | no |"
    assert c.chosen is None and c.lines()[-1].startswith(
        "calibration: not reproduced at any LR of the sweep"
    )
    # nothing to match: no run at all
    monkeypatch.setattr(cal, "pool_map", lambda *a, **k: pytest.fail("ran"))
    c = cal.calibrate(real_run(None), 1000, 1999, tiny(), 100, 20, tuple(spikes))
    assert c.real is None and c.lines() == [
        "calibration: skipped: the real window has no instability to match"
    ]


def test_not_reproduced_says_what_the_mapping_did_not_carry(seg):
    run = real_run(1500)
    scale = np.where(np.arange(1000, 2000) < 1490, 65536.0, 4096.0)
    run = Run(metrics=run.metrics.with_columns(pl.Series("loss_scale", scale)))
    fid = check(seg, run, [outcome("recorded", 0, None)], "recorded")
    # the collapse at 1490 is the real instability now, before the spike at 1500
    assert (fid.real_step, fid.real_kind) == (1490, "loss_scale_collapse")
    assert fid.lines[0].endswith(
        "stays stable in 1/1 seed(s) (its fp16 loss scale moved (65,536 -> 4,096), which is "
        "not emulated in the segment)"
    )


def test_a_log_with_a_loss_scale_runs_the_small_model_in_emulated_fp16():
    from replay.config import tiny
    from replay.segment_run import segment_jobs

    run = real_run(1500)
    scale = np.where(np.arange(1000, 2000) < 1490, 65536.0, 4096.0)
    run = Run(metrics=run.metrics.with_columns(pl.Series("loss_scale", scale)))
    seg = plan_segment(run, 1000, 1999, steps=100, warmup=20, peak_lr=0.1)
    assert seg.fp16 and seg.actions[-1].startswith("fp16: the log gives a loss scale")
    jobs = segment_jobs(seg, tiny(), [], 1, None)
    assert {j.config["train"]["fp16"] for j in jobs} == {True}
    fid = check(seg, run, [outcome("recorded", 0, None)], "recorded")
    assert "loss scale moved" not in fid.lines[0]  # carried: nothing to say
