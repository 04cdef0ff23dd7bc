"""Window-averaged losses (Hugging Face Trainer): scaled bars and per-step reading."""

import numpy as np
import polars as pl

from logbook.detectors import detect
from logbook.run import Run, RunMeta


def _run(window_flag: bool) -> Run:
    rng = np.random.default_rng(0)
    steps = np.arange(10, 3010, 10)  # logged every 10 steps, each a mean of 10 losses
    loss = 3.0 * np.exp(-steps / 20000) * (1 + 0.002 * rng.standard_normal(steps.size))
    loss[150] *= 1.3  # one bad step of ~4x inside a 10-step mean
    extra = {"loss_window_averaged": True, "loss_window_steps": 10} if window_flag else {}
    meta = RunMeta(name="hf", format="hf-trainer", **extra)
    return Run(metrics=pl.DataFrame({"step": steps, "loss": loss}), meta=meta)


def _spikes(run: Run):
    return [f for f in detect(run) if f.kind == "loss_spike"]


def test_a_damped_one_step_spike_is_found_when_the_loss_is_window_averaged():
    (spike,) = _spikes(_run(window_flag=True))
    assert (spike.start_step, spike.step) == (1510, 1510)
    assert spike.evidence["loss_window_steps"] == 10
    per_step = spike.evidence["per_step_ratio_at_least"]
    assert per_step == 1 + (spike.evidence["ratio"] - 1) * 10
    assert 3.5 < per_step < 4.5  # the planted step was 4x in a mean of 10
    assert f"one step alone would have jumped {per_step:.3g}x" in spike.message


def test_the_same_series_without_the_flag_keeps_the_default_bars():
    assert _spikes(_run(window_flag=False)) == []


def test_a_bar_set_by_the_user_is_not_scaled():
    from logbook.detectors import default_config
    from logbook.detectors._window import scaled

    cfg = type(default_config()["loss_spike"]).model_validate({"min_ratio": 1.5})
    out = scaled(cfg, 10)
    assert out.min_ratio == 1.5
    assert out.single_record_ratio == 1.1
