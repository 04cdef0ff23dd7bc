"""Readings added for the fifth round of real excerpts: a log of overflow messages only,
gradient-boosting rounds, one rsl_rl block alone, an epoch of its total after the word
``epoch``, and each epoch's one record at its last step."""

from __future__ import annotations

import pytest

import parsers
from logbook.detectors import detect
from tests._cli import invoke
from tests._rows import column as _col
from tests._rows import one_run as _one

_DS = "[2024-07-17 19:44:0{s},829] [INFO] [loss_scaler.py:18{n}:update_scale] [deepspeed] "


def _overflow(s: int, text: str) -> str:
    return _DS.format(s=s, n=3) + f"OVERFLOW! Rank 0 Skipping step. {text}\n"


def test_overflow_messages_alone_are_the_skipped_steps_numbered_in_order(tmp_path):
    p = tmp_path / "overflow.log"
    p.write_text(
        _overflow(1, "Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1")
        + _overflow(2, "Attempted loss scale: 65536, reducing to 32768")
        + _overflow(3, "Attempted loss scale: 32768, reducing to 16384")
        + _overflow(4, "Attempted loss scale: 16384, reducing to 8192")
    )
    run = _one(p)
    assert _col(run, "step") == [1, 2, 3, 4]
    assert _col(run, "loss_scale") == [None, 32768.0, 16384.0, 8192.0]
    assert _col(run, "loss") == [None, None, None, None]
    skips = [e for e in run.events if e.kind == "overflow_skip"]
    assert [e.step for e in skips] == [1, 2, 3, 4]
    assert [e.attempted_scale for e in skips] == [65536.0, 65536.0, 32768.0, 16384.0]
    assert any("the 4 overflow messages are read as 4 skipped steps" in c for c in run.meta.caveats)
    found = [f for f in detect(run) if f.kind == "overflow_skip"]
    assert [(f.start_step, f.end_step) for f in found] == [(1, 4)]


def test_overflow_messages_with_the_scale_grown_back_between_them_are_no_steps(tmp_path, capsys):
    # 8192 -> 4096, then 8192 attempted again: a thousand quiet steps raised it in between
    p = tmp_path / "overflow.log"
    p.write_text(
        _overflow(1, "Attempted loss scale: 8192, reducing to 4096")
        + _overflow(5, "Attempted loss scale: 8192, reducing to 4096")
    )
    run = _one(p)
    assert run.metrics.height == 0
    assert [e.step for e in run.events if e.kind == "overflow_skip"] == [None, None]


_XGBOOST = (
    "Will train until train-logloss hasn't improved in 1000 rounds.\n"
    "[500]\teval-logloss:0.41906\ttrain-logloss:0.160439\n"
    "[1000]\teval-logloss:0.468176\ttrain-logloss:0.093267\n"
    "[1500]\teval-logloss:0.523016\ttrain-logloss:0.059736\n"
)
# (LightGBM's possessive keys: ``training's binary_logloss``)
_LIGHTGBM = (
    "[1]\ttraining's binary_logloss: 0.712679\tvalid_1's binary_logloss: 0.712513\n"
    "Train until valid scores didn't improve in 100 rounds.\n"
    "[2]\ttraining's binary_logloss: 0.732192\tvalid_1's binary_logloss: 0.731889\n"
    "[3]\ttraining's binary_logloss: 0.751667\tvalid_1's binary_logloss: 0.751244\n"
)


@pytest.mark.parametrize(
    ("text", "steps", "losses", "other", "values"),
    [
        (
            _XGBOOST,
            [500, 1000, 1500],
            [0.160439, 0.093267, 0.059736],
            "eval_logloss",
            [0.41906, 0.468176, 0.523016],
        ),
        (
            _LIGHTGBM,
            [1, 2, 3],
            [0.712679, 0.732192, 0.751667],
            "valid_1_s_binary_logloss",
            [0.712513, 0.731889, 0.751244],
        ),
    ],
    ids=["xgboost", "lightgbm"],
)
def test_boosting_rounds_are_records_with_the_training_loss(
    tmp_path, text, steps, losses, other, values
):
    p = tmp_path / "train.log"
    p.write_text(text)
    run = _one(p)
    assert _col(run, "step") == steps
    assert _col(run, "loss") == losses
    assert _col(run, other) == values


def test_a_rank_tag_before_a_space_is_still_a_tag(tmp_path):
    p = tmp_path / "ranks.log"
    p.write_text("".join(f"[0] step {s} loss 2.{s}\n" for s in (10, 20, 30)))
    run = _one(p)
    assert _col(run, "step") == [10, 20, 30]
    assert _col(run, "loss") == [2.1, 2.2, 2.3]


_BLOCK = """################################################################################
                      Learning iteration 17/50000

                       Computation: 44180 steps/s (collection: 1.731s, learning 0.495s)
             Mean action noise std: 1.00
          Mean value_function loss: nan
               Mean surrogate loss: nan
                 Mean entropy loss: 17.0273
                       Mean reward: 2.69
               Mean episode length: 29.72
--------------------------------------------------------------------------------
                   Total timesteps: 1769472
                    Iteration time: 2.23s
"""


def test_one_rsl_rl_block_alone_is_a_record(tmp_path, monkeypatch, capsys):
    p = tmp_path / "block.log"
    p.write_text(_BLOCK)
    run = _one(p)
    assert run.meta.format == "kv-blocks"
    assert _col(run, "step") == [17]
    assert _col(run, "mean_reward") == [2.69]
    code, out, _ = invoke(monkeypatch, capsys, "detect", str(p), "--fail-on", "critical")
    assert code == 1
    assert "nonfinite" in out and "at 17" in out


def test_a_record_line_before_key_lines_is_no_block_header(tmp_path):
    # detectron2's last record, then its evaluation's ``key: value`` lines: not one block
    p = tmp_path / "d2.log"
    rec = (
        "[12/22 20:0{m}:15] d2.utils.events INFO:  eta: 0:00:00  iter: {i}  total_loss: 7.{m}"
        "  loss_cls: 0.31  lr: 0.0002  max_mem: 9000M\n"
    )
    keys = "".join(f"  metric_{k}: 0.{k}\n" for k in range(8))
    p.write_text(rec.format(m=1, i=479) + rec.format(m=2, i=499) + keys)
    run = _one(p)
    assert run.meta.format != "kv-blocks"
    assert _col(run, "step") == [479, 499]


def test_each_epochs_one_record_at_its_last_step_is_counted_over_the_epochs(tmp_path):
    p = tmp_path / "mindyolo.log"
    p.write_text(
        "".join(
            f"2025-04-10 16:49:32,284 [INFO] Epoch {e}/300, Step 4/4, imgsize (640, 640), "
            f"loss: 0.27{e}, lbox: 0.1035, cur_lr: 0.0088\n"
            f"2025-04-10 16:49:32,287 [INFO] Epoch {e}/300, Step 4/4, step time: 23330.36 ms\n"
            for e in (35, 36, 37)
        )
    )
    run = _one(p)
    # ``Epoch E/N`` counts from 1: epoch 35's last step is (35 - 1) x 4 + 4
    assert _col(run, "step") == [140, 144, 148]


def test_an_epoch_of_its_total_after_the_word_counts_from_one(tmp_path):
    p = tmp_path / "ppocr.log"
    p.write_text(
        "".join(
            f"[2024/03/04 12:02:42] ppocr INFO: epoch: [{e}/20] step: [{s}/400], "
            f"loss: 1{e}.{s}, lr: 0.000793\n"
            for e, s in ((12, 300), (12, 400), (13, 100), (13, 200))
        )
    )
    run = _one(p)
    assert _col(run, "step") == [11 * 400 + 300, 11 * 400 + 400, 12 * 400 + 100, 12 * 400 + 200]


def test_a_bare_epoch_of_its_total_still_counts_from_zero(tmp_path):
    # Swin's ``Train: [14/300][250/1251]``: epochs 0..299
    p = tmp_path / "swin.log"
    p.write_text(
        "".join(
            f"[2022-03-14 09:05:16 swin] (main.py 226): INFO Train: [{e}/300][{i}/1251]\t"
            f"eta 0:10:52 lr 0.000710\ttime 0.6408 (0.6516)\tloss 6.{i} (6.3074)\n"
            for e, i in ((14, 1240), (15, 0), (15, 10))
        )
    )
    run = _one(p)
    assert _col(run, "step") == [14 * 1251 + 1240, 15 * 1251, 15 * 1251 + 10]


def test_a_megatron_record_wrapped_after_every_bar_is_one_record(tmp_path):
    p = tmp_path / "wrapped.log"
    p.write_text(
        "iteration 5/50 | elapsed time per iteration: 21392.5 ms |\n"
        "learning rate: 1.350000E-04 | global batch size: 4096 |\n"
        "loss scale: 1.0 | grad norm: nan |\n"
        "number of skipped iterations: 0 | number of nan iterations: 0\n"
        "\n"
        "iteration 6/50 | elapsed time per iteration: 21313.4 ms |\n"
        "learning rate: 1.620000E-04 | global batch size: 4096 |\n"
        "lm loss: 1.034E+01 | loss scale: 1.0 | grad norm: 3.2 |\n"
    )
    run = _one(p)
    assert _col(run, "step") == [5, 6]
    assert _col(run, "lr") == [1.35e-04, 1.62e-04]
    assert _col(run, "loss_scale") == [1.0, 1.0]
    assert _col(run, "skipped") == [0, None]
    assert _col(run, "loss") == [None, 10.34]
    g = _col(run, "grad_norm")
    assert g[0] != g[0] and g[1] == 3.2  # (NaN)
    (st,) = run.meta.parse
    assert (st.record_lines, st.continuation_lines, st.unrecognized) == (2, 5, 0)


def _d2(it: int, eta: float, loss: float) -> str:
    return f'{{"eta_seconds": {eta}, "iteration": {it}, "lr": 0.00025, "total_loss": {loss}}}\n'


def test_a_finished_job_relaunched_with_a_longer_schedule_is_a_restart(tmp_path):
    # detectron2's metrics.json: the ETA falls to 0 at 99, the next job goes on at 119
    p = tmp_path / "metrics.json"
    first = [_d2(i, 4.0 * (99 - i) / 20, 1.0 - i / 1000) for i in range(19, 100, 20)]
    second = [_d2(i, 2.0 * (999 - i), 0.8) for i in range(119, 200, 20)]
    p.write_text("".join(first + second))
    run = _one(p)
    (restart,) = [e for e in run.events if e.kind == "restart"]
    assert (restart.resume_step, restart.source.line) == (99, 5)
    assert _col(run, "segment") == [0] * 5 + [1] * 5


def test_a_job_from_scratch_after_a_finished_one_is_no_restart(tmp_path):
    p = tmp_path / "metrics.json"
    p.write_text(_d2(9, 0.0, 1.2) + "".join(_d2(i, 300.0 - i, 1.1) for i in (19, 39, 59)))
    assert [e.kind for r in parsers.read_logs(p) for e in r.events if e.kind == "restart"] == []


def test_a_counter_of_the_launch_starting_over_while_the_step_goes_on_is_a_restart(tmp_path):
    # stable-baselines3's progress.csv: learn(reset_num_timesteps=False) after a reload
    p = tmp_path / "progress.csv"
    head = "time/fps,time/time_elapsed,time/total_timesteps,time/iterations,train/loss\n"
    rows = [(600, 10 * k, 1024 * k, k, 0.01 * k) for k in range(1, 6)]
    rows += [(610, 2 * k, 1024 * (5 + k), k, 0.02) for k in range(1, 4)]
    p.write_text(head + "".join(",".join(map(str, r)) + "\n" for r in rows))
    run = _one(p)
    assert _col(run, "step") == [1024 * k for k in range(1, 9)]
    restarts = [e for e in run.events if e.kind == "restart"]
    assert [(e.resume_step, e.source.line) for e in restarts] == [(5120, 6)]
    assert "time_time_elapsed starts over (50 -> 2)" in restarts[0].text
    assert _col(run, "segment") == [0] * 5 + [1] * 3


def test_a_trial_and_its_seed_are_no_record(tmp_path):
    p = tmp_path / "trials.txt"
    trial = "trial:{t}/30 seed:{s}\n"
    val = "step:{n}/3090 val_loss:{v} train_time:{x}s step_avg:319.13ms\n"
    p.write_text(
        "".join(
            trial.format(t=t, s=t - 1)
            + "".join(val.format(n=n, v=5 - n / 1000, x=n * 0.3) for n in (0, 125, 250))
            for t in (1, 2)
        )
    )
    (run,) = parsers.read_logs(p)
    assert run.metrics.height == 0
    assert sum(e.kind == "validation" for e in run.events) == 6


def test_apex_overflow_messages_that_halve_the_scale_are_the_skipped_steps(tmp_path):
    p = tmp_path / "apex.log"
    msg = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {}\n"
    p.write_text("".join(msg.format(v) for v in (32768.0, 16384.0, 8192.0)))
    run = _one(p)
    assert _col(run, "step") == [1, 2, 3]
    assert _col(run, "loss_scale") == [32768.0, 16384.0, 8192.0]


def test_apex_overflow_messages_setting_one_scale_twice_are_no_steps(tmp_path):
    # 4096 twice: the scale grew back to 8192 in between, over steps that printed nothing
    p = tmp_path / "apex.log"
    msg = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {}\n"
    p.write_text("".join(msg.format(v) for v in (4096.0, 4096.0, 2048.0)))
    (run,) = parsers.read_logs(p)
    assert run.metrics.height == 0
    assert [e.step for e in run.events if e.kind == "overflow_skip"] == [None, None, None]
