"""Keys of real trainers that reach the canonical columns through the alias table."""

from __future__ import annotations

from pathlib import Path

import pytest
from _rows import only_run

import parsers
from parsers.reader.aliases import canonical

MAXTEXT = (
    "I1203 10:15:40.123456 140245 max_logging.py:35] completed step: 0, seconds: 44.923, "
    "TFLOP/s/device: 17.022, Tokens/s/device: 1094.129, total_weights: 196608, loss: 12.038, "
    "lm_loss: 12.038, perplexity: 169056.234\n"
    "I1203 10:15:41.123456 140245 max_logging.py:35] completed profiler activation/deactivation "
    "step: 1, total_weights: 196608, loss: 12.010, lm_loss: 12.010, perplexity: 164321.000\n"
    "I1203 10:15:47.123456 140245 max_logging.py:35] completed step: 2, seconds: 5.658, "
    "TFLOP/s/device: 135.158, Tokens/s/device: 8687.815, total_weights: 196608, loss: 11.689, "
    "lm_loss: 11.689, perplexity: 119000.000\n"
)


_run = only_run


def test_maxtext_seconds_are_the_step_time(tmp_path):
    run = _run(tmp_path, MAXTEXT)
    m = run.metrics
    # (the absl header ``... max_logging.py:35]`` is no column)
    assert set(m.columns) == {
        "step", "segment", "time", "source", "line", "loss", "step_time_s", "lm_loss",
        "perplexity", "tflop_s_device", "tokens_s_device", "total_weights",
    }  # fmt: skip
    assert m.select("line", "step", "loss", "step_time_s").rows() == [
        (1, 0, 12.038, 44.923),
        (2, 1, 12.01, None),  # a profiler's boundary step prints no time
        (3, 2, 11.689, 5.658),
    ]
    assert m.get_column("tflop_s_device").to_list() == [17.022, None, 135.158]
    (stats,) = run.meta.parse
    assert (stats.lines, stats.record_lines, stats.ignored, stats.unrecognized) == (3, 3, 0, 0)


def test_the_maxtext_excerpts_read_seconds_as_step_time():
    root = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "maxtext"
    (run,) = parsers.read_logs(root / "understand_logs_deepseek2_16b_synthetic_ten_steps.log")
    assert run.metrics.get_column("step").to_list() == list(range(10))
    assert run.metrics.get_column("step_time_s").to_list()[:3] == [44.923, 0.319, 5.658]


@pytest.mark.parametrize(
    "key",
    [
        "cross-entropy-loss",
        "cross_entropy_loss",
        "Cross Entropy Loss",
        "cross-entropy",
        "train/cross-entropy-loss",
        "CrossEntropyLoss",
        "ce",
        "xent-loss",
    ],
)
def test_cross_entropy_spellings_are_the_loss(key):
    assert canonical(key) == "loss"


def test_a_hyphenated_cross_entropy_key_reads_as_the_loss(tmp_path):
    text = "".join(
        f"step {i} | cross-entropy-loss: {3 - i / 10:.2f} | learning-rate: 1e-4\n" for i in (1, 2)
    )
    run = _run(tmp_path, text)
    assert run.metrics.select("step", "loss", "lr").rows() == [(1, 2.9, 1e-4), (2, 2.8, 1e-4)]


def test_rwkv_bars_step_on_their_one_letter_s_key():
    root = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "text"
    (run,) = parsers.read_logs(root / "rwkv_issue266_mini_epoch_bars.log")
    m = run.metrics
    assert m.select("line", "step", "minie").rows() == [
        (3, 833, 1.0), (4, 1666, 2.0), (5, 2499, 3.0), (6, 3332, 4.0), (7, 4165, 5.0),
    ]  # fmt: skip
    assert m.get_column("loss").to_list()[::4] == [1.68766, 1.114444]
    assert m.get_column("prog_pct").to_list()[-1] == 100.0
    (stats,) = run.meta.parse
    assert (stats.lines, stats.record_lines, stats.ignored, stats.unrecognized) == (7, 5, 2, 0)


@pytest.mark.parametrize(
    ("key", "column"),
    [
        ("actor/grad_norm", "grad_norm"),
        ("actor/lr", "lr"),
        ("policy/grad_norm", "grad_norm"),
        ("critic/grad_norm", None),  # (the value model's: not the run's own)
        ("step_i", "step"),
        ("Finished training step", "step"),
        ("completed_iteration", "step"),
    ],
)
def test_keys_of_rlhf_and_jax_trainers(key, column):
    assert canonical(key) == column


def test_a_policys_nan_grad_norm_reaches_the_detector(tmp_path):
    text = "".join(
        f"(main_task pid=1234) step:{s} - actor/pg_loss:0.01 - actor/grad_norm:{g} - "
        "actor/lr:1e-06 - critic/score/mean:0.117\n"
        for s, g in ((1, "0.291"), (2, "0.305"), (3, "nan"))
    )
    run = _run(tmp_path, text, "verl.log")
    assert run.metrics.get_column("lr").to_list() == [1e-06] * 3
    assert [(e.step, e.metric) for e in run.events_of("nonfinite")] == [(3, "grad_norm")]
