"""More quirks of real logs (PaddlePaddle, TensorFlow, WeNet, ESPnet, Tacotron 2, ParlAI,
Chainer, HF Trainer loops): each went wrong once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import parsers


def _runs(tmp_path: Path, text: str, name: str = "x.log"):
    p = tmp_path / name
    p.write_text(text)
    return parsers.read_logs(p)


def _col(run, name: str) -> list:
    return run.metrics.get_column(name).to_list()


def test_a_non_finite_word_padded_to_a_width_is_nan_not_zero(tmp_path):
    # C's %07.5f prints ``0000nan``; PaddleOCR's {:x<6f} prints ``nanxxx``
    text = "".join(
        f"Step {s:7d} ( 1.00%): loss = {v} EER=0.3\n"
        for s, v in ((10, "3.98384"), (20, "3.71272"), (30, "0000nan"))
    )
    (run,) = _runs(tmp_path, text)
    loss = _col(run, "loss")
    assert loss[:2] == [3.98384, 3.71272] and math.isnan(loss[2])
    text = (
        "[2023/07/17 10:22:21] ppocr INFO: epoch: [3/1000], global_step: 146, lr: 0.000010, "
        "loss: 2.762494, avg_batch_cost: 0.71592 s\n"
        "[2023/07/17 10:22:38] ppocr INFO: epoch: [3/1000], global_step: 147, lr: 0.000010, "
        "loss: 2.762494, avg_batch_cost: 16.65319 s\n"
        "[2023/07/17 10:22:38] ppocr INFO: epoch: [3/1000], global_step: 148, lr: 0.000010, "
        "loss: nanxxx, avg_batch_cost: 0.69777 s\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [146, 147, 148]
    assert math.isnan(_col(run, "loss")[2])
    assert [e.step for e in run.events_of("nonfinite")] == [148]


def test_paddlenlp_optimizer_not_run_is_an_overflow_at_the_step_it_precedes(tmp_path):
    text = (
        "[2023-11-28 14:31:29,583] [ WARNING] - optimizer not run, scale_before: 0.25, "
        "scale_after: 0.125\n"
        "[2023-11-28 14:31:29,586] [    INFO] - loss: 2.09252715, learning_rate: 0.0, "
        "global_step: 18, interval_runtime: 4.3468\n"
        "[2023-11-28 14:31:34,041] [ WARNING] - optimizer not run, scale_before: 0.125, "
        "scale_after: 0.0625\n"
        "[2023-11-28 14:31:34,045] [    INFO] - loss: 2.04623556, learning_rate: 0.0, "
        "global_step: 19, interval_runtime: 4.4585\n"
    )
    (run,) = _runs(tmp_path, text)
    skips = run.events_of("overflow_skip")
    assert [(e.step, e.attempted_scale, e.new_scale) for e in skips] == [
        (18, 0.25, 0.125),
        (19, 0.125, 0.0625),
    ]


def test_tensorflow_restoring_a_step_checkpoint_is_a_resume_from_that_step(tmp_path):
    text = (
        "INFO:tensorflow:Restoring parameters from training_frcnn/model.ckpt-500000\n"
        "INFO:tensorflow:Starting Queues.\n"
        "INFO:tensorflow:global step 500001: loss = 0.1333 (7.742 sec/step)\n"
        "INFO:tensorflow:global step 500002: loss = 0.1147 (0.105 sec/step)\n"
    )
    (run,) = _runs(tmp_path, text)
    assert [e.resume_step for e in run.events_of("restart")] == [500000]
    assert _col(run, "step") == [500001, 500002]


def test_a_coordinator_error_of_tensorflow_is_a_crash(tmp_path):
    text = (
        "INFO:tensorflow:global step 124371: loss = 0.0627 (0.133 sec/step)\n"
        "INFO:tensorflow:global step 124372: loss = 0.2287 (0.133 sec/step)\n"
        "INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework."
        "errors_impl.InvalidArgumentError'>, LossTensor is inf or nan. : Tensor had NaN values\n"
    )
    (run,) = _runs(tmp_path, text)
    (crash,) = run.events_of("hardware_failure")
    assert (crash.cause, crash.source.line) == ("exception", 3)


def test_a_last_line_cut_after_its_step_is_no_record(tmp_path):
    text = "".join(
        f"INFO:tensorflow:global step {s}: loss = {v} (0.5 sec/step)\n"
        for s, v in ((670, "1.9610"), (680, "3.4317"), (690, "3.5062"))
    )
    (run,) = _runs(tmp_path, text + "INFO:tensorflow:global step 700: l")
    assert _col(run, "step") == [670, 680, 690]
    (run,) = _runs(tmp_path, text + "INFO:tensorflow:global step 700: loss = 2.1 (0.5")
    assert _col(run, "step") == [670, 680, 690, 700]  # (its loss is whole)
    # (the values left out on purpose: a record of its step)
    (run,) = _runs(tmp_path, text + "INFO:tensorflow:global step 700: ...\n")
    assert _col(run, "step") == [670, 680, 690, 700]
    (run,) = _runs(tmp_path, text + "INFO:tensorflow:global step 700: loss = nan (0.5")
    assert _col(run, "step") == [670, 680, 690, 700]


def test_wenet_batch_of_epoch_counts_the_batch_and_cv_lines_are_validation(tmp_path):
    text = (
        "".join(
            f"2023-01-30 18:47:0{i},107 DEBUG TRAIN Batch 4/{b} loss {v} loss_att 10.9 "
            f"loss_ctc 16.6 lr 0.00032621 rank {r}\n"
            for i, (b, v, r) in enumerate(
                ((203700, 12.64, 0), (203700, 12.64, 1), (203800, 23.6, 0), (203800, 23.6, 1))
            )
        )
        + "2023-01-30 18:49:55,773 DEBUG CV Batch 4/0 loss 28.5 loss_att 24.1 "
        + "history loss 27.9 rank 0\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [203700, 203800]
    assert _col(run, "epoch") == [4.0, 4.0]
    (val,) = run.events_of("validation")
    assert (val.split, val.step, val.values["loss"]) == ("val", 203800, 28.5)


def test_tacotron2_train_loss_iteration_then_value(tmp_path):
    text = (
        "Epoch: 6\n"
        "Train loss 174 0.163115 Grad Norm 0.404827 5.34s/it\n"
        "Train loss 175 0.189592 Grad Norm 0.491446 4.42s/it\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [174, 175]
    assert _col(run, "loss") == [0.163115, 0.189592]
    assert _col(run, "grad_norm") == [0.404827, 0.491446]


def test_espnet2_batch_ranges_count_over_epochs_from_the_results_line(tmp_path):
    text = (
        "[PC] 2020-11-11 16:41:00,521 (trainer:486) INFO: 7epoch:train:7126-7500batch: "
        "iter_time=0.001, loss=1.601, lr_0=0.100\n"
        "[PC] 2020-11-11 16:41:04,070 (trainer:243) INFO: 7epoch results: [train] "
        "iter_time=0.001, loss=1.613, lr_0=0.100, total_count=52549\n"
        "[PC] 2020-11-11 16:41:09,988 (trainer:486) INFO: 8epoch:train:1-375batch: "
        "iter_time=0.001, loss=1.585, lr_0=0.100\n"
        "[PC] 2020-11-11 16:41:14,988 (trainer:486) INFO: 8epoch:train:376-750batch: "
        "iter_time=0.001, loss=1.580, lr_0=0.100\n"
    )
    (run,) = _runs(tmp_path, text)
    # 52549 iterations after 7 epochs: 7507 an epoch
    assert _col(run, "step") == [6 * 7507 + 7500, 7 * 7507 + 375, 7 * 7507 + 750]
    assert _col(run, "loss") == [1.601, 1.585, 1.58]


def test_espnet_grad_norm_nan_skip_is_a_skipped_step(tmp_path):
    text = (
        "[host:0/8] 2022-02-21 11:40:05,031 (trainer:617) INFO: 1epoch:train:36631-42735batch: "
        "iter_time=1.299e-04, loss=66.878, optim0_lr0=0.001\n"
        "[host:0/8] 2022-02-21 11:42:05,031 (trainer:617) WARNING: The grad norm is nan. "
        "Skipping updating the model.\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [42735]
    assert [e.step for e in run.events_of("overflow_skip")] == [42736]


def test_printed_loss_tensors_are_the_loss_numbered_in_order(tmp_path):
    text = "tensor(3.2207, device='cuda:0')\n" + "tensor(nan, device='cuda:0')\n" * 4
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [1, 2, 3, 4, 5]
    loss = _col(run, "loss")
    assert loss[0] == 3.2207 and all(math.isnan(v) for v in loss[1:])
    assert [e.step for e in run.events_of("nonfinite")] == [2, 3, 4, 5]


def test_dicts_before_the_bars_first_position_count_from_one(tmp_path):
    bar = "  0%|" + " " * 40 + "| {}/13000 [00:10<36:34:36, 10.13s/it]"
    text = (
        "{'loss': 0.3290, 'reward': -2.0304, 'learning_rate': 5e-05}\n"
        + bar.format(1)
        + "{'loss': nan, 'reward': 5.7646, 'learning_rate': 5e-05}\n"
        + bar.format(2)
        + "{'loss': 0.2527, 'reward': 1.2237, 'learning_rate': 5e-05}\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [1, 2, 3]
    assert [e.step for e in run.events_of("nonfinite")] == [2]


def test_parlai_total_train_updates_is_the_step(tmp_path):
    text = "".join(
        f"[rank:  0] [ time:4.0s total_exs:{x} epochs:4.23 ] {{'exs': 1134, 'loss': {v}, "
        f"'updates': {u}, 'lr': 0.007, 'total_train_updates': {t}}}\n"
        for x, v, u, t in ((2114, 0.949, 81, 151), (2506, 0.3908, 28, 179))
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [151, 179]


def test_a_scripts_terminate_on_a_non_finite_loss_is_a_crash(tmp_path):
    text = (
        "Epoch [0/5]; Iter [0/9450]; Loss 10.08; LR 1.00e-06; Iter time 3.72\n"
        "Loss in not finite. Skip this training step.\n"
        "Loss in not finite. Terminate training.\n"
    )
    (run,) = _runs(tmp_path, text)
    (crash,) = run.events_of("hardware_failure")
    assert crash.cause == "nonfinite_loss"
    assert [e.step for e in run.events_of("overflow_skip")] == [1]


def test_trainer_dicts_all_alike_are_each_a_log_not_twins(tmp_path):
    line = "{'loss': 0.0, 'learning_rate': 1.0533245556287031e-07, 'epoch': 0.01}\n"
    (run,) = _runs(tmp_path, line * 5)
    assert _col(run, "step") == [1, 2, 3, 4, 5]


def test_a_chainer_table_with_blank_validation_cells_and_an_iteration_column(tmp_path):
    text = (
        "epoch       iteration   main/loss   validation/main/loss  elapsed_time\n"
        "0           100         0.0183482                         123.279\n"
        "0           200         -0.00548435                        236.267\n"
        "1           300         -0.0430187  0.52                  348.067\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [100, 200, 300]
    assert _col(run, "epoch") == [0.0, 0.0, 1.0]
    assert _col(run, "loss") == [0.0183482, -0.00548435, -0.0430187]
    assert _col(run, "validation_main_loss") == [None, None, 0.52]
    assert _col(run, "elapsed_time") == [123.279, 236.267, 348.067]


def test_gluoncv_batch_in_brackets_after_the_epoch_is_the_step(tmp_path):
    text = "".join(
        f"INFO:root:[Epoch 0][Batch {b}], Speed: 41.28 samples/sec, CrossEntropy={v}, "
        f"SmoothL1={v}\n"
        for b, v in ((0, "19.047861"), (1, "nan"), (2, "nan"))
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [0, 1, 2]
    assert [e.step for e in run.events_of("nonfinite")] == [1, 2]


def test_deepspeech_training_of_epoch_is_the_epoch(tmp_path):
    text = "".join(
        f"Training of Epoch {e} - loss: inf\nValidation of Epoch {e} - loss: {v}\n"
        for e, v in ((0, 95.800559), (1, 81.028593), (2, 77.50257))
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [0, 1, 2]
    assert [e.values["loss"] for e in run.events_of("validation")] == [
        95.800559,
        81.028593,
        77.50257,
    ]


@pytest.mark.parametrize(
    ("last", "cause"),
    [
        ("**Killed**", "sigkill"),
        ("run.sh: line 66: 777016 Killed`", "sigkill"),
        ("[2026-04-20T03:25:23.011] error: *** STEP 1942963.1 ON", "cancelled"),
        (
            "[2023-11-21 20:42:22,682] [INFO] [launch.py:315:sigkill_handler] Killing "
            "subprocess 156890",
            "sigkill",
        ),
        (
            # (cut short after ``SIG``, as pasted)
            "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2860778 "
            "closing signal SIG",
            "process_exit",
        ),
    ],
)
def test_crash_words_of_shells_slurm_and_torchrun(tmp_path, last, cause):
    text = "step 1 | loss 2.50\nstep 2 | loss 2.40\nstep 3 | loss 2.30\n" + last + "\n"
    (run,) = _runs(tmp_path, text)
    (crash,) = run.events_of("hardware_failure")
    assert crash.cause == cause


def test_colossalai_found_inf_is_an_overflow(tmp_path):
    text = (
        "Epoch 0 step 18 loss 2581.0 lr 0.0167\n"
        "WARNING colossalai - ShardedOptimizerV2 - WARNING: found inf during ShardedOptimV2 step\n"
        "Epoch 0 step 19 loss 2580.0 lr 0.0167\nEpoch 0 step 20 loss 2579.0 lr 0.0167\n"
    )
    (run,) = _runs(tmp_path, text)
    assert [e.step for e in run.events_of("overflow_skip")] == [19]


def test_a_step_counted_from_zero_within_an_epoch_of_a_stated_length(tmp_path):
    # TRACE: ``Beginning of Epoch 1/18, Total Micro Batches 8`` then steps 0..7 an epoch
    text = "Beginning of Epoch 1/18, Total Micro Batches 4\n"
    text += "".join(f"Epoch 1, Step {s}, Loss: {1.0 - s / 10}\n" for s in range(4))
    text += "Beginning of Epoch 2/18, Total Micro Batches 4\n"
    text += "".join(f"Epoch 2, Step {s}, Loss: {0.6 - s / 10}\n" for s in range(2))
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [0, 1, 2, 3, 4, 5]
    assert any("4 steps an epoch (as the log states it)" in c for c in run.meta.caveats)


def test_mmcv_json_log_val_rows_are_validations_and_iters_count_over_epochs(tmp_path):
    rows = []
    for epoch in (1, 2):
        for it in (10, 20, 30):
            rows.append({"mode": "train", "epoch": epoch, "iter": it, "lr": 0.001, "loss": 1 / it})
        rows.append({"mode": "val", "epoch": epoch, "iter": 5, "lr": 0.001, "mAP": 0.2 * epoch})
    p = tmp_path / "None.log.json"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (run,) = parsers.read_logs(p)
    assert _col(run, "step") == [10, 20, 30, 40, 50, 60]
    assert _col(run, "lr") == [0.001] * 6
    vals = run.events_of("validation")
    assert [(v.step, v.values["m_ap"], v.values["epoch"]) for v in vals] == [
        (30, 0.2, 1.0),
        (60, 0.4, 2.0),
    ]
    assert run.events_of("restart") == []


def test_sb3_progress_csv_total_timesteps_and_rows_that_start_empty(tmp_path):
    p = tmp_path / "progress.csv"
    p.write_text(
        "rollout/ep_rew_mean,time/total_timesteps,time/iterations,train/loss,eval/mean_reward\n"
        "-1183.1,2048,1,,\n-1286.2,4096,2,549.5,\n,10000,,385.2,-900.0\n-1200.0,12288,6,1940.1,\n"
    )
    (run,) = parsers.read_logs(p)
    assert _col(run, "step") == [2048, 4096, 10000, 12288]
    assert _col(run, "loss") == [None, 549.5, 385.2, 1940.1]


def test_a_resume_printed_twice_by_two_handlers_is_one(tmp_path):
    text = (
        "INFO:tensorflow:Restoring parameters from train/model.ckpt-500\n" * 2
        + "INFO:tensorflow:global step 501: loss = 0.1333 (7.742 sec/step)\n" * 2
        + "INFO:tensorflow:global step 502: loss = 0.1147 (0.105 sec/step)\n" * 2
    )
    (run,) = _runs(tmp_path, text)
    assert [e.resume_step for e in run.events_of("restart")] == [500]
    assert _col(run, "step") == [501, 502]


def test_stylegan_ticks_are_the_steps(tmp_path):
    text = "".join(
        f"tick {t}     kimg {4.0 * t:.1f}      time 46s          sec/tick 6.8     "
        f"sec/kimg 427.84  maintenance 39.2   cpumem 4.15   gpumem 5.31   augment 0.000\n"
        for t in range(4)
    )
    (run,) = _runs(tmp_path, text)
    assert _col(run, "step") == [0, 1, 2, 3]
    assert _col(run, "kimg") == [0.0, 4.0, 8.0, 12.0]
