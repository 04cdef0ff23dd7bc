"""Quirks of real logs the tolerant reader keeps right (each one went wrong once)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

import parsers
from logbook.detectors import detect
from logbook.errors import InputError
from logbook.run import Run


def _runs(tmp_path: Path, text: str, name: str = "x.log"):
    p = tmp_path / name
    p.write_text(text)
    return parsers.read_logs(p)


def _steps(run) -> list:
    return run.metrics.get_column("step").to_list()


def test_a_relaunch_that_repeats_the_crashed_step_keeps_both_records(tmp_path):
    text = (
        "step 1 | loss 2.50 | lr 1.0e-04\nstep 2 | loss 2.40 | lr 1.0e-04\n"
        "step 3 | loss 2.30 | lr 1.0e-04\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "Resuming training from checkpoint at step 2\n"
        "step 3 | loss 2.31 | lr 1.0e-04\nstep 4 | loss 2.20 | lr 1.0e-04\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2, 3, 3, 4]
    (r,) = run.events_of("restart")
    assert (r.resume_step, r.last_step_before, r.lost_steps, r.cause) == (2, 3, 1, "cuda_error")


def test_per_rank_copies_in_blocks_are_one_run_read_once(tmp_path):
    text = (
        "[rank0]: step 1 | loss 2.50\n[rank0]: step 2 | loss 2.40\n"
        "[rank1]: step 1 | loss 2.50\n[rank1]: step 2 | loss 2.40\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2]
    assert "2 per-rank copies of records dropped" in run.meta.caveats


def _lf(step: int, loss: float) -> str:
    return f'{{"current_steps": {step}, "total_steps": 6566, "loss": {loss}, "epoch": 0.1}}\n'


def test_a_file_written_twice_over_is_read_once_and_keeps_its_resume(tmp_path):
    # two writers appending to one trainer_log.jsonl, the second two records behind, their
    # losses drifting apart in the last digits; then a resume from step 20
    a = [10, 20, 30, 40, 50, 60, 70]
    first = [10, 20] + [s for x, y in zip(a[2:], a, strict=False) for s in (x, y)] + [60, 70]
    loss = {s: 1.0 - s / 100 for s in a}
    text = "".join(_lf(s, loss[s] + (0.0003 if s in first[:i] else 0)) for i, s in enumerate(first))
    text += _lf(30, 0.7321) + _lf(30, 0.7321) + _lf(40, 0.6055) + _lf(40, 0.6054)
    (run,) = _runs(tmp_path, text, "trainer_log.jsonl")
    assert _steps(run) == [10, 20, 30, 40, 50, 60, 70, 30, 40]
    assert run.metrics.get_column("line").to_list() == [1, 2, 3, 5, 7, 9, 11, 15, 17]
    (r,) = run.events_of("restart")
    assert (r.step, r.source.line) == (30, 15)
    assert "9 per-rank copies of records dropped" in run.meta.caveats


def test_reruns_of_one_config_with_near_losses_are_not_copies(tmp_path):
    # a benchmark's resumes from one checkpoint: the same steps again, losses to 1e-4
    text = "".join(_lf(s, 2.0 - s / 1000 + k / 1e4) for k in range(3) for s in (1, 2, 3))
    runs = _runs(tmp_path, text, "trainer_log.jsonl")  # three runs from step 1
    assert [_steps(r) for r in runs] == [[1, 2, 3]] * 3


def test_a_progress_bars_percentage_is_not_its_step(tmp_path):
    text = (
        " 25%|\u2588\u2588\u258c       | 1/4 [00:01<00:03, 1.00it/s, loss=2.5]\n"
        " 50%|\u2588\u2588\u2588\u2588\u2588     | 2/4 [00:02<00:02, 1.00it/s, loss=2.4]\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2]
    assert run.metrics.get_column("loss").to_list() == [2.5, 2.4]


def test_a_stamps_utc_offset_is_applied(tmp_path):
    text = (
        "2024-05-01T12:00:00+02:00 step 1 | loss 2.50\n"
        "2024-05-01T12:01:00-01:30 step 2 | loss 2.40\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.get_column("time").to_list() == [
        datetime(2024, 5, 1, 10, 0, tzinfo=UTC),
        datetime(2024, 5, 1, 13, 31, tzinfo=UTC),
    ]


def test_logging_steps_as_json_or_a_flag_numbers_the_records(tmp_path):
    dicts = (
        "{'loss': 2.5, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
        "{'loss': 2.4, 'learning_rate': 1e-05, 'epoch': 0.2}\n"
    )
    for echo in ('  "logging_steps": 10,\n', "--logging_steps 10\n"):
        (run,) = _runs(tmp_path, echo + dicts)
        assert _steps(run) == [10, 20]
        assert "no step printed: records numbered in order x logging_steps=10" in run.meta.caveats


def test_a_json_count_with_its_total_gives_the_step(tmp_path):
    text = (
        '{"global_step/max_steps": "601/2161", "loss": 2.31, "learning_rate": 1e-4}\n'
        '{"global_step/max_steps": "602/2161", "loss": 2.29, "learning_rate": 1e-4}\n'
    )
    (run,) = _runs(tmp_path, text, "trainer_log.jsonl")
    assert _steps(run) == [601, 602]


def test_an_old_megatron_nan_loss_is_read_as_nan(tmp_path):
    row = (
        " iteration       {s}/  500000 | consumed samples: {c} | elapsed time per iteration (ms):"
        " 1234.5 | learning rate: 1.000E-04 | global batch size:    64 | lm loss: {loss} |"
        " loss scale: 65536.0 | number of skipped iterations:   0 |"
        " number of nan iterations:   0 |\n"
    )
    text = "".join(
        row.format(s=s, c=s * 64, loss=v)
        for s, v in ((10, "1.050000E+01"), (20, "NAN"), (30, "9.9E+00"))
    )
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "megatron"
    loss = run.metrics.get_column("loss").to_list()
    assert _steps(run) == [10, 20, 30] and loss[0] == 10.5 and loss[1] != loss[1] and loss[2] == 9.9
    assert [(e.step, e.metric, e.value) for e in run.events_of("nonfinite")] == [
        (20, "loss", "nan")
    ]


def test_a_compact_trainer_state_keeps_eval_predict_and_summary_rows_out(tmp_path):
    text = (
        '{"best_metric": null, "epoch": 1.0, "global_step": 30, "log_history": [\n'
        ' {"epoch": 0.33, "grad_norm": 1.2, "learning_rate": 4e-05, "loss": 2.5, "step": 10},\n'
        ' {"epoch": 0.33, "eval_loss": 2.4, "eval_runtime": 1.0, "step": 10},\n'
        ' {"epoch": 0.66, "grad_norm": 1.1, "learning_rate": 3e-05, "loss": 2.3, "step": 20},\n'
        ' {"epoch": 0.66, "predict_loss": 2.2, "predict_runtime": 1.0, "step": 20},\n'
        ' {"epoch": 1.0, "test_loss": 2.1, "step": 30},\n'
        ' {"epoch": 1.0, "train_runtime": 100.0, "train_loss": 2.4, "step": 30}\n'
        '], "max_steps": 30}\n'
    )
    (run,) = _runs(tmp_path, text, "trainer_state.json")
    assert run.meta.format == "hf-trainer"
    assert run.metrics.select("step", "loss").rows() == [(10, 2.5), (20, 2.3)]
    found = [(e.kind, e.step, e.split) for e in run.events]
    assert found == [
        ("validation", 10, "eval"),
        ("validation", 20, "predict"),
        ("validation", 30, "test"),
    ]


def test_a_number_inside_a_keys_parentheses_names_the_key(tmp_path):
    text = (
        "[2024-05-01 10:00:00] train | step 10 | train/CE loss=3.21 | optim/LR (group 0)=1.0e-04"
        " | optim/total grad norm=0.91\n"
        "[2024-05-01 10:00:10] train | step 20 | train/CE loss=3.11 | optim/LR (group 0)=1.0e-04"
        " | optim/total grad norm=0.87\n"
    )
    (run,) = _runs(tmp_path, text)
    rows = run.metrics.select("step", "loss", "lr", "grad_norm").rows()
    assert rows == [(10, 3.21, 1e-4, 0.91), (20, 3.11, 1e-4, 0.87)]
    assert not [c for c in run.metrics.columns if c.startswith("optim")]


def test_nemo_lightning_bars_with_float_global_steps(tmp_path):
    bar = (
        "Epoch 0:   {p}%|\u258f         | {i}/500 [00:10<08:10,  1.00it/s, v_num=0, "
        "reduced_train_loss={loss}, global_step={g}, consumed_samples={c}, "
        "train_step_timing in s=0.980, lr={lr}]\n"
    )
    text = bar.format(p=2, i=10, loss="10.50", g="9.000", c="640.0", lr="1.5e-5") + bar.format(
        p=4, i=20, loss="9.800", g="19.00", c="1280.0", lr="3e-5"
    )
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "nemo"
    assert run.metrics.select("step", "loss", "lr", "step_time_s", "samples").rows() == [
        (9, 10.5, 1.5e-5, 0.98, 640),
        (19, 9.8, 3e-5, 0.98, 1280),
    ]


def test_keras_progress_counts_steps_over_the_epochs_it_announces(tmp_path):
    bar = "{i}/300 [=========>....................] - ETA: 12s - loss: {loss} - accuracy: 0.21\n"
    end = (
        "300/300 [==============================] - 20s 66ms/step - loss: {loss} - val_loss: 1.9\n"
    )
    text = (
        "Epoch 1/3\n"
        + bar.format(i=100, loss="2.3456")
        + bar.format(i=200, loss="2.1234")
        + end.format(loss="2.0012")
        + "Epoch 2/3\n"
        + bar.format(i=100, loss="1.8456")
    )
    (run,) = _runs(tmp_path, text)
    # the epoch's last bar, with the validation values after the training ones, is the
    # record of its last step; its validation values are columns of it
    assert run.metrics.select("step", "loss", "epoch", "val_loss").rows() == [
        (100, 2.3456, 1.0, None),
        (200, 2.1234, 1.0, None),
        (300, 2.0012, 1.0, 1.9),
        (400, 1.8456, 2.0, None),
    ]
    assert run.events_of("restart") == []
    (stats,) = run.meta.parse
    assert (stats.lines, stats.records, stats.unrecognized) == (6, 4, 0)


def test_a_step_that_starts_over_each_epoch_is_counted_over_the_epochs(tmp_path):
    text = (
        "Epoch [1/2], Step [100/600], Loss: 0.3456\n"
        "Epoch [1/2], Step [600/600], Loss: 0.1456\n"
        "Epoch [2/2], Step [100/600], Loss: 0.1256\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss", "epoch").rows() == [
        (100, 0.3456, 1.0),
        (600, 0.1456, 1.0),
        (700, 0.1256, 2.0),
    ]
    assert run.events_of("restart") == []


def test_pytorch_examples_word_language_model_and_mnist(tmp_path):
    wlm = (
        "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 25.51 | loss  7.12 |"
        " ppl  1240.55\n"
        "| end of epoch   1 | time: 80.01s | valid loss  5.62 | valid ppl   275.47\n"
        "| epoch   2 |   200/ 2983 batches | lr 20.00 | ms/batch 25.08 | loss  5.49 |"
        " ppl   242.67\n"
    )
    (run,) = _runs(tmp_path, wlm)
    assert run.metrics.select("step", "loss", "lr").rows() == [
        (200, 7.12, 20.0),
        (3183, 5.49, 20.0),
    ]
    (val,) = run.events_of("validation")
    assert (val.step, val.values["loss"]) == (200, 5.62)
    mnist = (
        "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300119\n"
        "Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.254394\n"
        "Train Epoch: 2 [0/60000 (0%)]\tLoss: 0.194283\n"
    )
    (run,) = _runs(tmp_path, mnist, "mnist.log")
    assert run.metrics.select("step", "loss").rows() == [
        (0, 2.300119),
        (640, 2.254394),
        (60000, 0.194283),
    ]


def test_timm_counts_its_batches_over_the_epochs(tmp_path):
    row = (
        "Train: {e} [ {i:>3}/1251 (  0%)]  Loss: {loss} ({loss})  Time: 0.512s,  500.1/s  "
        "(0.530s,  483.1/s)  LR: 1.000e-06  Data: 0.010 (0.012)\n"
    )
    text = "".join(
        row.format(e=e, i=i, loss=v) for e, i, v in ((0, 0, 6.935), (0, 100, 6.912), (1, 0, 6.85))
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss", "epoch").rows() == [
        (0, 6.935, 0.0),
        (100, 6.912, 0.0),
        (1251, 6.85, 1.0),
    ]


def test_json_log_lines_whose_records_are_messages(tmp_path):
    text = (
        '{"asctime": "2024-05-01 10:00:00", "levelname": "INFO", '
        '"message": "step 10 loss 2.3456 lr 1.0e-04"}\n'
        '{"asctime": "2024-05-01 10:00:05", "levelname": "INFO", '
        '"message": "step 20 loss 2.2456 lr 1.0e-04"}\n'
    )
    (run,) = _runs(tmp_path, text, "train.jsonl")
    assert run.metrics.select("step", "loss", "lr").rows() == [
        (10, 2.3456, 1e-4),
        (20, 2.2456, 1e-4),
    ]
    assert run.metrics.get_column("time").to_list() == [
        datetime(2024, 5, 1, 10, 0, tzinfo=UTC),
        datetime(2024, 5, 1, 10, 0, 5, tzinfo=UTC),
    ]


def test_a_notebooks_table_pasted_as_markdown_or_tabs(tmp_path):
    md = (
        "| Step | Training Loss | Validation Loss |\n"
        "|------|---------------|-----------------|\n"
        "| 10 | 2.345600 | 2.400000 |\n"
        "| 20 | 2.123400 | 2.300000 |\n"
    )
    (run,) = _runs(tmp_path, md, "table.log")
    # the Trainer's table: training loss on the records, validation loss as events
    assert run.meta.format == "hf-trainer-table"
    assert run.metrics.select("step", "loss").rows() == [(10, 2.3456), (20, 2.1234)]
    got = [(e.step, e.values) for e in run.events_of("validation")]
    assert got == [(10, {"loss": 2.4}), (20, {"loss": 2.3})]
    (run,) = _runs(tmp_path, "Step\tTraining Loss\n1\t2.345600\n2\t2.123400\n", "tabs.log")
    assert run.metrics.select("step", "loss").rows() == [(1, 2.3456), (2, 2.1234)]


def test_torchtune_bars_give_epoch_then_step(tmp_path):
    text = (
        "1|1|Loss: 11.7640380859375:   0%|          | 1/1000 [00:01<21:31,  1.29s/it]\n"
        "1|2|Loss: 11.612345:   0%|          | 2/1000 [00:02<19:31,  1.17s/it]\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss", "epoch").rows() == [
        (1, 11.7640380859375, 1.0),
        (2, 11.612345, 1.0),
    ]


def test_lightning_rich_progress_counts_over_epochs(tmp_path):
    bar = "\u2501" * 40
    row = (
        "Epoch {e}/9  {bar} {i}/500 0:00:10 \u2022 0:00:40 10.00it/s v_num: 0 train_loss: {loss}\n"
    )
    text = "".join(
        row.format(e=e, bar=bar, i=i, loss=v)
        for e, i, v in ((0, 100, 2.345), (0, 200, 2.145), (1, 100, 1.945))
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss", "epoch").rows() == [
        (100, 2.345, 0.0),
        (200, 2.145, 0.0),
        (600, 1.945, 1.0),
    ]
    assert [
        c for c in run.metrics.columns if c not in ("step", "segment", "time", "source", "line")
    ] == [
        "loss",
        "epoch",
        "v_num",
    ]


def test_a_step_beyond_int64_and_json_nested_too_deep_are_no_internal_errors(tmp_path):
    row = (
        " iteration       {s}/  500000 | consumed samples:          640 | elapsed time per"
        " iteration (ms): 1234.5 | learning rate: 1.000E-04 | global batch size:    64 |"
        " lm loss: 1.050000E+01 |\n"
    )
    (run,) = _runs(tmp_path, row.format(s=10) + row.format(s="9" * 5000), "big.log")
    assert run.meta.format == "megatron"
    assert run.metrics.get_column("step").to_list() == [10, None]  # the other step: unreadable
    text = "step 1 | loss 2.5\n" + "[" * 20000 + "]" * 20000 + "\nstep 2 | loss 2.4\n"
    (run,) = _runs(tmp_path, text, "nested.log")
    assert run.metrics.select("step", "loss").rows() == [(1, 2.5), (2, 2.4)]
    assert run.meta.parse[0].first_unrecognized == [2]


def test_a_typod_date_in_a_logbook_loses_that_entrys_time_only(tmp_path):
    text = (
        "2023-13-14 10:00: rolled back to 100 and lowered the lr to 3e-5\n"
        "2023-03-01 12:00: restarted\n"
    )
    p = tmp_path / "logbook.txt"
    p.write_text(text)
    (run,) = parsers.read_logs(p, "chronicle")
    assert "line 1: no such date '2023-13-14'" in run.meta.caveats
    times = {e.source.line: e.time for e in run.events}
    assert times[1] is None and times[2] == datetime(2023, 3, 1, 12, 0, tzinfo=UTC)


def test_odd_digits_and_a_bad_time_in_a_logbook_file_are_values_lost_not_files(tmp_path):
    text = (
        "iter 0: loss 4.2000, time 500.10ms, mfu -100.00%\n"
        "iter 10: loss 3.9000, time 30.10ms, mfu \u0663\u0664%\n"  # Arabic-Indic digits
    )
    (run,) = _runs(tmp_path, text, "train.log")
    assert run.meta.format == "nanogpt"
    assert run.metrics.select("step", "loss", "mfu_pct").rows() == [(0, 4.2, None), (10, 3.9, None)]
    good = tmp_path / "good.jsonl"
    stamps = [datetime(2024, 5, 1, 9, tzinfo=UTC), datetime(2024, 5, 1, 10, tzinfo=UTC)]
    Run(metrics=pl.DataFrame({"step": [1, 2], "loss": [2.5, 2.4], "time": stamps})).write(good)
    rows = good.read_text().replace("2024-05-01T09:00:00", "not a time", 1)
    (run,) = _runs(tmp_path, rows, "run.jsonl")
    assert run.metrics.select("step", "loss").rows() == [(1, 2.5), (2, 2.4)]
    assert run.metrics.get_column("time").to_list() == [None, datetime(2024, 5, 1, 10, tzinfo=UTC)]


def test_two_step_counters_the_one_counting_every_record_is_the_step(tmp_path):
    # LitGPT with gradient accumulation 2: ``step`` counts optimizer steps, ``iter``
    # every micro-batch; each micro-batch's loss is a record of its own
    text = "".join(
        f"iter {i} step {i // 2}: loss {2.5 - i / 100:.4f}, iter time: 198.00ms"
        + (" (optimizer.step)" if i % 2 else "")
        + "\n"
        for i in range(6)
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "optimizer_step", "loss").rows() == [
        (i, i // 2, round(2.5 - i / 100, 4)) for i in range(6)
    ]
    assert run.events_of("restart") == []


def test_a_meters_validation_line_named_val_is_no_record(tmp_path):
    # ProgressMeter lines of a script (``Epoch: [e][ i/N]``) beside its ``val[ i/N]``
    train = "Epoch: [{e}][  0/391]\tTime  1.505 ( 1.505)\tLoss {l:.4e} ({l:.4e})\tAcc@1  14.06\n"
    val = "val[ 0/40]\tTime  2.986 ( 2.986)\tLoss 3.6274e+00 (3.6274e+00)\tAcc@1   8.98\n"
    text = train.format(e=0, l=3.436) + val + train.format(e=1, l=2.2442) + val
    text += train.format(e=2, l=2.0863)
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss").rows() == [(0, 3.436), (391, 2.2442), (782, 2.0863)]
    assert len(run.events_of("validation")) == 2


def test_a_collectors_comment_is_no_record_whatever_it_quotes(tmp_path):
    text = (
        "# source: someone/repo issue 6 (every logged step has loss 0.0)\n"
        "# note: the cut-off last line \"{'loss': 0.0,\" was dropped\n"
        "{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
        "{'loss': 0.4, 'learning_rate': 2e-05, 'epoch': 0.2}\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss").rows() == [(1, 0.5), (2, 0.4)]
    (stats,) = run.meta.parse
    assert (stats.records, stats.ignored, stats.unrecognized) == (2, 2, 0)


def test_equal_losses_at_other_learning_rates_are_records_not_twins(tmp_path):
    row = "{{'loss': 0.0, 'grad_norm': nan, 'learning_rate': {lr}, 'epoch': 0.0}}\n"
    text = "".join(row.format(lr=f"{1.2e-4 + i * 7e-6:.6g}") for i in range(5))
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2, 3, 4, 5]
    # a second logger's print of the same record (its learning rate rounded) is one
    twin = (
        "03/12/2024 11:24:33 - INFO - callbacks - "
        "{'loss': 0.0000, 'learning_rate': 4.9999e-02, 'epoch': 0.01}\n"
    )
    text = (
        twin
        + "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.04999871292419044, 'epoch': 0.01}\n"
    )
    (run,) = _runs(tmp_path, text, "twins.log")
    assert run.metrics.height == 1


def test_overflows_without_a_step_skip_the_steps_after_the_last_record(tmp_path):
    over = (
        "[2023-08-02 00:41:17,526] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
        "OVERFLOW! Rank {r} Skipping step. Attempted loss scale: {a}, reducing to {b}\n"
    )
    rec = (
        "[2023-08-02 00:41:17,935] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, "
        "skipped={k}, lr=[0.0001], mom=[(0.9, 0.999)]\n"
        "2023-08-02 00:41:17.936 | INFO     | __main__:log_dist:54 - [Rank 0] Loss: {l}\n"
    )
    text = "".join(over.format(r=0, a=2 ** (32 - i), b=2 ** (31 - i)) for i in range(3))
    text += rec.format(s=3, k=3, l=10.87)
    # two ranks say each of the next two: one overflow each; the first skips step 4, the
    # second is printed as the engine prints step 6 (the same moment): step 6's own
    for i in range(3, 5):
        text += over.format(r=0, a=2 ** (32 - i), b=2 ** (31 - i))
        text += over.format(r=1, a=2 ** (32 - i), b=2 ** (31 - i))
    text += rec.format(s=6, k=5, l=10.86)
    (run,) = _runs(tmp_path, text)
    overflows = run.events_of("overflow_skip")
    assert [(e.step, e.attempted_scale) for e in overflows] == [
        (1, 2.0**32),
        (2, 2.0**31),
        (3, 2.0**30),
        (4, 2.0**29),
        (6, 2.0**28),
    ]


def test_keys_of_other_trainers_in_the_alias_table(tmp_path):
    opennmt = "Epoch  1, {b}/37527; acc:   3.99; ppl: 12792.57; xent:   {x}; 3438 src tok/s;\n"
    text = "".join(opennmt.format(b=b, x=x) for b, x in ((50, 9.46), (100, 9.31), (150, 9.2)))
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss").rows() == [(50, 9.46), (100, 9.31), (150, 9.2)]
    paddle = "2022-12-08 17:57:31,371-INFO: Total iter: {i}, epoch: 0, batch: {i}, loss: [{l}]\n"
    text = "".join(paddle.format(i=i, l=v) for i, v in ((0, "10.000229"), (10, "nan"), (20, "nan")))
    (run,) = _runs(tmp_path, text, "paddle.log")
    assert _steps(run) == [0, 10, 20]
    assert [e.step for e in run.events_of("nonfinite")][:1] == [10]


def test_a_long_table_of_run_metric_step_value_rows_is_read_wide(tmp_path):
    # MLflow's export: one row per run, metric and step; here two runs, two metrics
    head = '"Run","Run ID","metric","step","timestamp","value"\n'
    rows = [
        ("a", "loss", 10, 2.5),
        ("a", "lr", 10, 0.001),
        ("b", "loss", 10, 3.0),
        ("a", "loss", 20, 2.25),
        ("a", "lr", 20, 0.001),
        ("b", "loss", 20, 2.75),
    ]
    text = head + "".join(
        f'"{r}","id-{r}","{m}","{s}","17618841{s}000","{v}"\n' for r, m, s, v in rows
    )
    runs = _runs(tmp_path, text, "loss.csv")
    got = {r.meta.name: r.metrics.select("step", "loss").rows() for r in runs}
    assert sorted(got.values()) == [[(10, 2.5), (20, 2.25)], [(10, 3.0), (20, 2.75)]]
    (a,) = [r for r in runs if r.metrics.get_column("loss")[0] == 2.5]
    assert a.metrics.get_column("lr").to_list() == [0.001, 0.001]


def test_timm_epochs_count_from_zero_and_its_ema_test_lines_are_validation(tmp_path):
    train = (
        "Train: {e} [{i:4d}/5004 ({p:3d}%)]  Loss:  {l:.6f} (5.7736)  Time: 0.449s,  569.84/s  "
        "(0.474s,  540.03/s)  LR: 5.334e-03  Data: 0.015 (0.014)\n"
    )
    test = "Test{ema}: [   0/195]  Time: 2.276 (2.276)  Loss:  3.5284 (3.5284)  Acc@1: 28.9062\n"
    text = train.format(e=1, i=5000, p=100, l=5.085654)
    text += test.format(ema="") + test.format(ema=" (EMA)")
    text += train.format(e=2, i=0, p=0, l=5.015893) + train.format(e=2, i=50, p=1, l=5.05302)
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss").rows() == [
        (10004, 5.085654),
        (10008, 5.015893),
        (10058, 5.05302),
    ]
    assert len(run.events_of("validation")) == 2


def test_a_job_scripts_shell_lines_are_no_records(tmp_path):
    script = ["    ; LR_DECAY_STYLE=constant", "TRAIN_ITERS=137650", "GRAD_ACC_STEPS=2"]
    text = "".join(f"{line} \\\n" for line in script) + "        bash train.sh\n"
    for step, loss in ((136004, 12.3165), (136005, 11.9679)):
        text += f"[2025-11-10 10:20:0{step % 10}][I] step={step} loss={loss} lr=0.0002\n"
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [136004, 136005]
    assert run.metrics.get_column("loss").to_list() == [12.3165, 11.9679]
    assert run.events_of("restart") == []


def test_pasted_runs_without_steps_are_numbered_each_from_one(tmp_path):
    row = "{{'loss': {l}, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': {e}}}\n"
    text = "".join(row.format(l=2 - i / 10, e=e) for i, e in enumerate((0.0, 0.0, 0.01, 0.01)))
    text += "".join(row.format(l=2.1 - i / 10, e=e) for i, e in enumerate((0.0, 0.0, 0.0)))
    runs = _runs(tmp_path, text)
    assert [_steps(r) for r in runs] == [[1, 2, 3, 4], [1, 2, 3]]


def test_a_table_of_several_runs_named_in_its_first_column(tmp_path):
    text = "model,step,train_loss,val_loss\n"
    text += "char,0,4.72,4.73\nchar,500,2.28,2.50\nbpe,0,10.9,10.9\nbpe,500,5.1,5.3\n"
    runs = _runs(tmp_path, text, "runs.csv")
    assert sorted(r.metrics.select("step", "loss").rows() for r in runs) == [
        [(0, 4.72), (500, 2.28)],
        [(0, 10.9), (500, 5.1)],
    ]


def test_the_speedruns_step_lines_are_records_without_a_loss(tmp_path):
    line = "step:{s}/1660 train_time:{t}ms step_avg:91.60ms\n"
    text = line.format(s=249, t=22810) + line.format(s=250, t=22901)
    text += "step:250/1660 val_loss:3.9653 train_time:22901ms step_avg:91.60ms\n"
    text += line.format(s=251, t=22993)
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "modded-nanogpt"
    assert run.metrics.select("step", "step_time_s", "train_time_ms").rows() == [
        (249, 0.0916, 22810.0),
        (250, 0.0916, 22901.0),
        (251, 0.0916, 22993.0),
    ]
    (v,) = run.events_of("validation")
    assert (v.step, v.values["loss"]) == (250, 3.9653)


def test_callback_and_trainer_prints_pair_up_without_chaining_and_bars_give_steps(tmp_path):
    # LLaMA-Factory prints each log twice (its callback, rounded, then the Trainer's
    # dict); with the loss stuck at 0.0 and the epoch rounded, a dict and the next
    # log's callback line look alike too: only the print pairs are one record
    bar = "  1%|█▍          | {n}/6249 [08:38<11:33:05,  6.74s/it]"
    cb = "[INFO|2024-12-08 01:{m}:00] llamafactory.train.callbacks:157 >> "
    cb += "{{'loss': 0.0000, 'learning_rate': {lr:.4e}, 'epoch': 0.04}}"
    dict_ = "{{'loss': 0.0, 'grad_norm': nan, 'learning_rate': {lr}, 'epoch': 0.04}}"
    lrs = [4.998452110450943e-05, 4.998223113110496e-05, 4.9979783305842495e-05]
    text = cb.format(m=10, lr=lrs[0]) + "\n" + dict_.format(lr=lrs[0]) + "\n"
    for n, m, lr in zip((75, 80), (11, 12), lrs[1:], strict=True):
        text += bar.format(n=n) + cb.format(m=m, lr=lr) + "\n" + dict_.format(lr=lr) + "\n"
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "hf-trainer-log"
    # the first log has no bar before it: one logging interval (5) before the bar at 75
    assert run.metrics.select("line", "step").rows() == [(2, 70), (4, 75), (6, 80)]
    assert run.metrics.get_column("lr").to_list() == lrs  # the Trainer's fuller prints
    assert "llamafactory_train_callbacks" not in run.metrics.columns


def test_nemo_bars_take_the_reduced_loss_not_lightnings_running_nan(tmp_path):
    bar = (
        "Epoch 0:   3%|▎         | {p}/20101 [2:12:19<76:15:08, 14.05s/it, loss=nan, v_num=,"
        " reduced_train_loss={loss}, gradient_norm=1.010, global_step={g}.0, throughput=19.00]\n"
    )
    text = "".join(bar.format(p=g + 1, g=g, loss=loss) for g, loss in [(563, 3.92), (564, 3.91)])
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "nemo"
    assert run.metrics.select("step", "loss").rows() == [(563, 3.92), (564, 3.91)]
    assert run.metrics.get_column("ptl_loss").is_nan().all()
    assert run.events_of("nonfinite") == []


def test_swin_logger_epoch_and_batch_counters_count_over_epochs(tmp_path):
    # Swin Transformer's logger: ``[time name] (file lineno): LEVEL Train: [e/E][i/N]``
    row = (
        "[2024-01-04 19:44:{s:02d} vssmsmall] (main.py 216): INFO Train: [{e}/300][{i}/2859]"
        "\teta 5:21:46 lr 0.000001\t wd 0.0500\ttime 0.8781 (6.7766)\tloss {loss} (6.9486)"
        "\tgrad_norm 1.5751 (1.5225)\tmem 20468MB\n"
    )
    rows = [(0, 0, 6.9483), (0, 10, 6.9443), (1, 0, 6.5), (1, 10, 6.4)]
    text = "".join(row.format(s=k, e=e, i=i, loss=loss) for k, (e, i, loss) in enumerate(rows))
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss", "epoch").rows() == [
        (0, 6.9483, 0.0), (10, 6.9443, 0.0), (2859, 6.5, 1.0), (2869, 6.4, 1.0)
    ]  # fmt: skip
    assert "main_py" not in run.metrics.columns


def test_a_pastes_line_numbers_are_no_step_and_the_bars_give_the_steps(tmp_path):
    text = (
        "1743] {'loss': 3.5534, 'grad_norm': 1.41, 'learning_rate': 2.0e-06, 'epoch': 0.01}\n"
        "[1744] \n"
        "[1745]   1%|          | 10/1752 [00:29<1:22:01,  2.83s/it]\n"
        "[1746]   1%|          | 11/1752 [00:31<1:21:50,  2.82s/it]\n"
        "[1747]   1%|          | 20/1752 [00:57<1:22:40,  2.86s/it]\n"
        "[1748] {'loss': 0.0, 'grad_norm': 1.41, 'learning_rate': 4.3e-06, 'epoch': 0.01}\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "hf-trainer-log"
    assert run.metrics.select("step", "loss").rows() == [(10, 3.5534), (20, 0.0)]


def test_a_comment_that_quotes_an_error_is_no_crash(tmp_path):
    text = (
        "# source: an issue titled 'Watchdog caught collective operation timeout'\n"
        "step 1 | loss 2.50 | lr 1.0e-04\nstep 2 | loss 2.40 | lr 1.0e-04\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.events == []
    assert _steps(run) == [1, 2]


def test_lines_cut_before_their_counter_are_numbered_records(tmp_path):
    text = (
        "grad_norm: 205225.2680  loss: 2049.9260  loss_cls: 863.1097  loss_bbox: 614.7597\n"
        "grad_norm: 638.4964  loss: 626.2026  loss_cls: 143.0205  loss_bbox: 243.8403\n"
        "grad_norm: nan  loss: nan  loss_cls: nan  loss_bbox: nan\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2, 3]
    assert run.metrics.get_column("loss").to_list()[:2] == [2049.926, 626.2026]
    assert "no step printed: records numbered in order (1, 2, 3, ...)" in run.meta.caveats
    assert sorted({e.step for e in run.events_of("nonfinite")}) == [3]


def test_two_such_lines_alone_are_not_records(tmp_path):
    text = "grad_norm: 2.1  loss: 2.04\ngrad_norm: 2.0  loss: 2.01\n"
    p = tmp_path / "x.log"
    p.write_text(text)
    with pytest.raises(InputError, match="unrecognized log format"):
        parsers.read_logs(p)


def test_a_rounded_nemo_global_step_gives_way_to_the_bars_count(tmp_path):
    bar = (
        "Epoch 0:   3%|▎         | {n}/1100000 [5:28:58<171:22:21,  1.73it/s, loss=2.52, v_num=,"
        " reduced_train_loss={l}, global_step=3.1e+4, consumed_samples=2.54e+8]\n"
    )
    text = "".join(bar.format(n=n, l=v) for n, v in ((34103, "2.510"), (34106, "2.520")))
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "nemo"
    assert run.metrics.select("step", "loss").rows() == [(34103, 2.51), (34106, 2.52)]


def test_a_trainer_state_pasted_without_its_opening_brace(tmp_path):
    text = (
        ' "best_metric": null,\n  "global_step": 1000,\n  "log_history": [\n'
        '    {"epoch": 6.33, "learning_rate": 3.49e-05, "loss": 14.8414, "step": 500},\n'
        '    {"epoch": 6.33, "eval_loss": NaN, "step": 500},\n'
        '    {"epoch": 12.66, "learning_rate": 8.34e-05, "loss": 0.0, "step": 1000}\n'
    )
    (run,) = _runs(tmp_path, text, "state.log")
    assert run.meta.format == "hf-trainer"
    assert run.metrics.select("step", "loss").rows() == [(500, 14.8414), (1000, 0.0)]


def test_a_trainer_logs_closing_row_without_loss_or_lr_is_no_record(tmp_path):
    row = (
        '{{"current_steps": {s}, "total_steps": 30, "loss": {l}, "eval_loss": null,'
        ' "learning_rate": {lr}, "epoch": {e}, "percentage": {p}}}\n'
    )
    text = (
        row.format(s=10, l="1.5", lr="2e-05", e="1.0", p="33.3")
        + row.format(s=20, l="1.4", lr="1e-05", e="2.0", p="66.7")
        + row.format(s=30, l="null", lr="null", e="3.0", p="100.0")
    )
    (run,) = _runs(tmp_path, text, "trainer_log.jsonl")
    assert _steps(run) == [10, 20]
    assert run.events_of("nonfinite") == []


def test_an_overflow_printed_just_before_a_steps_print_is_that_steps_own(tmp_path):
    # DeepSpeed-Chat with steps_per_print 10: the engine's own lines are the records; two
    # overflows between steps 500 and 510, the second printed the same millisecond as
    # step 510 (skipped 6 -> 8): steps 501 and 510
    rec = (
        "[2023-04-18 01:53:{t},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, "
        "skipped={k}, lr=[9.5e-06, 9.5e-06], mom=[(0.9, 0.95), (0.9, 0.95)]\n"
    )
    over = (
        "[2023-04-18 01:53:20,393] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] "
        "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a}, reducing to {b}\n"
    )
    text = "".join(rec.format(t=10 + i, s=450 + 10 * i, k=6) for i in range(6))
    text += over.format(a=131072, b=65536) + over.format(a=65536, b=32768)
    text += rec.format(t=21, s=510, k=8) + rec.format(t=28, s=520, k=8)
    (run,) = _runs(tmp_path, text)
    assert run.metrics.get_column("step").to_list()[-3:] == [500, 510, 520]
    overflows = run.events_of("overflow_skip")
    assert [(e.step, e.new_scale) for e in overflows] == [(501, 65536.0), (510, 32768.0)]


def test_a_crash_message_glued_onto_a_record_line_is_an_event(tmp_path):
    from logbook.detectors import detect

    bar = "  {n}/234 [..............................] - ETA: 25:09:00 - loss: {loss}"
    text = "\n".join(
        [
            "Epoch 1/10",
            bar.format(n=2, loss="43.9012"),
            bar.format(n=3, loss="44.4110") + "Batch 3: Invalid loss, terminating training",
            bar.format(n=4, loss="inf "),
            "",
        ]
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [2, 3, 4]
    assert [(e.kind, e.step, getattr(e, "cause", None)) for e in run.events] == [
        ("hardware_failure", 4, "nonfinite_loss"),  # Keras' batch 3 counts from 0
        ("nonfinite", 4, None),
    ]
    (crash,) = [f for f in detect(run) if f.kind == "crash"]
    assert (crash.step, crash.evidence["cause"]) == (4, "nonfinite_loss")
    # evidence glued onto a record that training survived: an event, but no crash
    survived = "\n".join(
        [
            "step 1 loss 2.50",
            "step 2 loss 2.40 CUDA out of memory. Tried to allocate 2.00 GiB",
            "step 3 loss 2.30",
            "step 4 loss 2.20",
            "",
        ]
    )
    (run,) = _runs(tmp_path, survived, "y.log")
    assert [(e.kind, e.step, e.cause) for e in run.events] == [("hardware_failure", 2, "oom")]
    assert [f.kind for f in detect(run) if f.kind == "crash"] == []


def test_keras_epochs_of_an_excerpt_count_from_one_and_plateau_lr_cuts_are_events():
    # an excerpt from epoch 4 of 20: ``Epoch E/N`` counts from 1, so epoch 4's last batch
    # is step 3 x 1500 + 1500; ReduceLROnPlateau's messages are LR changes at the step
    # before them; a callback message glued onto a bar is no part of its record
    path = Path(__file__).parent.parent / "fixtures/text/keras_reduce_lr_on_plateau_from_epoch4.log"
    (run,) = parsers.read_logs(path)
    assert _steps(run) == [6000, 7500, 9000, 10499, 10500, 11999, 12000]
    assert run.metrics.get_column("lr").to_list()[-1] == 1e-5
    cuts = [(e.step, e.source.line, e.new, e.manual) for e in run.events_of("lr_change")]
    assert cuts == [
        (7500, 6, 0.00010000000474974513, False),
        (10499, 11, 1.0000000474974514e-05, False),
    ]
    assert run.meta.parse[0].unrecognized == 0


def test_a_keras_callback_message_glued_onto_a_bar_is_cut_off(tmp_path):
    text = (
        "Epoch 1/10\n"
        "19264/19286 [============================>.] - ETA: 1s - loss: 0.0205Epoch 00000: "
        "val_loss improved from inf to 0.01735, saving model to model.h5\n"
        "19286/19286 [==============================] - 1247s - loss: 0.0205 - val_loss: 0.0174\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [19264, 19286]
    assert "to" not in run.metrics.columns
    assert not any(c.startswith("val_loss_improved") for c in run.metrics.columns)


def test_llamafactory_closing_line_repeating_the_last_step_is_no_record(tmp_path):
    # LLaMA-Factory's trainer_log.jsonl ends with a line of the train-end callback: the
    # last step again, no loss, throughput totals
    text = (
        _lf(5, 53.9602)
        + _lf(10, 42.0622)
        + '{"current_steps": 10, "total_steps": 10, "epoch": 1.0, "percentage": 100.0, '
        '"elapsed_time": "0:01:10", "remaining_time": "0:00:00", "throughput": 1200.5}\n'
    )
    (run,) = _runs(tmp_path, text, "trainer_log.jsonl")
    assert _steps(run) == [5, 10]
    assert run.events_of("restart") == []
    assert (run.meta.parse[0].records, run.meta.parse[0].ignored) == (2, 1)


def test_mindspore_steps_within_epochs_are_counted_over_them(tmp_path):
    # LossMonitor prints the step within its epoch; in sink mode each epoch's one record
    # is at its last step, so ``step: 100`` every time: global (epoch - 1) x 100 + 100
    text = "".join(
        f"epoch: {e} step: 100, loss is {5.0 - e / 10}\n"
        f"Train epoch time: 2{e}000.0 ms, per step time: 2{e}0.0 ms\n"
        for e in (26, 27, 28, 29)
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [2600, 2700, 2800, 2900]
    assert run.metrics.get_column("loss").to_list() == [2.4, 2.3, 2.2, 2.1]
    assert run.events_of("restart") == []
    assert (
        "the step counts within each epoch: counted over the epochs with 100 steps an epoch"
        " (the largest step printed in one)"
    ) in run.meta.caveats


def test_mindspore_steps_counted_from_one_within_epochs(tmp_path):
    steps = [(e, s) for e in (1, 2, 3) for s in (1, 2, 3)]
    text = "".join(f"epoch: {e} step: {s}, loss is 2.{e}{s}\n" for e, s in steps)
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_step_within_epochs_counted_from_zero_is_left_as_printed(tmp_path):
    # DGL's ``Epoch 00001 | Step 00020``: printed every 20 steps from 0, the epoch's
    # length is not in the file; the steps stay as printed (the epochs are segments)
    text = "".join(
        f"Epoch {e:05d} | Step {s:05d} | Loss {2 - e / 10 - s / 100:.4f}\n"
        for e in (0, 1, 2)
        for s in (0, 20)
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [0, 20, 0, 20, 0, 20]
    assert not any("within each epoch" in c for c in run.meta.caveats)


def test_a_global_step_printed_with_the_epoch_is_kept(tmp_path):
    text = "".join(f"epoch: {1 + s // 4} step: {s}, loss is 2.{s}\n" for s in range(1, 13))
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == list(range(1, 13))


def test_bracketed_keys_of_a_loguru_trainer_name_their_values(tmp_path):
    # LION's ``| [Loss] 51566519.44 | [exp] ./exp | [step]    89 |``: the global step is
    # the ``[step]`` field, not the epoch's iteration
    line = (
        "2023-01-25 00:2{m}:09.074 | INFO     | trainers.base_trainer:train_epochs:256 - [R0] "
        "| E{e} iter[ 14/ 15] | [Loss] {loss} | [exp] ./exp/0125/car | [step]   {s} | "
        "[url] none | [time] 0.4m (~5h) |[best] 0 -100.000x1e-2 \n"
    )
    text = "".join(
        line.format(m=k, e=5 + k, loss=loss, s=89 + 15 * k)
        for k, loss in enumerate(["51566519.44", "nan", "nan"])
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [89, 104, 119]
    assert run.metrics.get_column("loss").to_list()[0] == 51566519.44
    assert [e.step for e in run.events_of("nonfinite")] == [104, 119]


def test_a_nan_within_a_counted_things_name_is_no_value(tmp_path):
    # Megatron's ``number of nan iterations:   0`` read by the generic reader
    text = "".join(
        f"iteration {s} | lm loss 2.{s} | number of nan iterations:   {s // 2} |\n"
        for s in (1, 2, 3)
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss", "nan_count").rows() == [
        (1, 2.1, 0),
        (2, 2.2, 1),
        (3, 2.3, 1),
    ]
    assert run.events_of("nonfinite") == []


def test_a_line_counting_the_data_of_a_split_is_no_validation(tmp_path):
    # keras-yolo3's ``Train on 220 samples, val on 24 samples, with batch size 32.``
    text = (
        "Train on 220 samples, val on 24 samples, with batch size 32.\n"
        "Epoch 1/2\n7/7 [==========] - 9s 1s/step - loss: 12.5 - val_loss: 11.9\n"
        "Epoch 2/2\n7/7 [==========] - 8s 1s/step - loss: 11.0 - val_loss: 10.7\n"
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [7, 14]
    assert run.events_of("validation") == []
    assert run.meta.parse[0].first_unrecognized == [1]


def test_a_trainer_log_that_crashes_before_its_first_dict_is_read(tmp_path):
    # the Trainer's banner, then a traceback glued onto the bar at 0/30, cut before its
    # exception: an HF Trainer log with no record, and a crash
    text = (
        "[INFO|trainer.py:2078] 2024-06-01 16:22:16,125 >> ***** Running training *****\n"
        "[INFO|trainer.py:2079] 2024-06-01 16:22:16,125 >>   Num examples = 1,000\n"
        "  0%|          | 0/30 [00:00<?, ?it/s]Traceback (most recent call last):\n"
        '  File "/workspace/src/llamafactory/launcher.py", line 9, in <module>\n'
        "    launch()\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "hf-trainer-log"
    assert run.metrics.height == 0
    assert [(e.kind, e.cause, e.source.line) for e in run.events] == [
        ("hardware_failure", "exception", 3)
    ]


def test_a_note_pasted_after_a_dict_is_no_part_of_it(tmp_path):
    # an issue's dicts with the reporter's ``<-- spike #1 (step 4)`` beside one
    rows = [(1.46, 14.98), (1.28, 9.78), (1.60, 7.64), (1.14, 92.10), (1.54, 29.00)]
    text = "".join(f"{{'loss': {a:.2f},  'grad_norm':    {b:.2f}}}\n" for a, b in rows)
    text = text.replace("92.10}\n", "92.10}    <-- spike #1 (step 4)\n")
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2, 3, 4, 5]
    assert run.metrics.get_column("grad_norm").to_list() == [b for _, b in rows]
    assert not {"spike", "step_4"} & set(run.metrics.columns)


def test_two_bare_counters_are_the_epoch_and_the_batch_in_it(tmp_path):
    # Learning-to-See-in-the-Dark's ``print("%d %d Loss=%.3f Time=%.3f" % (epoch, cnt, ...))``:
    # epoch 333 ends at batch 161, 334 starts over at 1; every record kept, no restart
    rows = [(333, c) for c in (159, 160, 161)] + [(334, c) for c in (1, 2)]
    text = "".join(f"{e} {c} Loss=nan Time=0.04{c % 10}\n" for e, c in rows)
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [332 * 161 + c for c in (159, 160, 161)] + [333 * 161 + 1, 333 * 161 + 2]
    assert run.metrics.get_column("epoch").to_list() == [333.0] * 3 + [334.0] * 2
    assert len(run.events_of("nonfinite")) == 5
    assert run.events_of("restart") == []


def test_a_second_bare_number_that_does_not_count_is_no_column(tmp_path):
    text = "".join(f"{s} {s * 524288} loss {3 - s / 100}\n" for s in (10, 20, 30))
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [10, 20, 30]
    assert "_counter" not in run.metrics.columns and "epoch" not in run.metrics.columns


def test_a_running_mean_named_in_its_parentheses_is_the_values_mean(tmp_path):
    # UCTransNet's ``Loss:0.564 (Avg 0.5566) Dice:0.3038 (Avg 0.3144) LR 1.00e-03``
    text = "".join(
        f"   [Train] Epoch: [1][{s}/4899]  Loss:0.5{s} (Avg 0.55{s}) Dice:0.3{s} (Avg 0.31{s}) "
        f"LR 1.00e-03   (AvgTime 1.4)\n"
        for s in (367, 368, 369)
    )
    (run,) = _runs(tmp_path, text)
    row = run.metrics.row(0, named=True)
    assert (row["loss"], row["loss_avg"], row["dice"], row["dice_avg"]) == (
        0.5367,
        0.55367,
        0.3367,
        0.31367,
    )
    assert "avg" not in run.metrics.columns
    assert not any(") " in c for c in run.meta.caveats)


def test_a_count_within_a_key_is_no_value(tmp_path):
    # pointer_summarizer's ``steps 8400, seconds for 100 batch: 56.97 , loss: nan``
    text = "".join(
        f">steps {s}, seconds for 100 batch: 5{k}.97 , loss: {v}\n"
        for k, (s, v) in enumerate([(8300, "3.12"), (8400, "nan"), (8500, "nan")])
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "seconds_for_100_batch").rows() == [
        (8300, 50.97),
        (8400, 51.97),
        (8500, 52.97),
    ]
    assert [e.step for e in run.events_of("nonfinite")] == [8400, 8500]


def test_a_loggers_bracketed_source_location_is_no_metric(tmp_path):
    # a torchtitan descendant's ``[2025-02-03 09:22:59][I][mmm/train:458:__main__] step=10
    # global_avg_loss=11.101408 ...``: the location is no column, the global average the loss
    text = "".join(
        f"[2025-02-03 09:22:{s:02d}][I][mmm/train:458:__main__] step={s} "
        f"global_avg_loss={12 - s / 10:.6f} global_max_loss={12.5 - s / 10:.6f}\n"
        for s in (1, 2, 3)
    )
    text += "[2025-02-03 09:22:04][I][ezpz/dist:869] Using device: cuda\n"
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss", "global_max_loss").rows() == [
        (1, 11.9, 12.4),
        (2, 11.8, 12.3),
        (3, 11.7, 12.2),
    ]
    assert not {"mmm_train", "train", "ezpz_dist"} & set(run.metrics.columns)


def test_a_save_line_and_the_bar_of_that_save_are_one_save(tmp_path):
    # nanotron: ``Saving checkpoint at checkpoints/10`` then ``Saving weights: 100%|...``
    text = (
        "iteration: 9 / 15 | lm_loss: 9.1\niteration: 10 / 15 | lm_loss: 9.0\n"
        "[WARNING|DP=0|PP=0|TP=0]: Saving checkpoint at checkpoints/10\n"
        "Saving weights: 100%|##########| 15/15 [00:00<00:00, 55.6it/s]\n"
        "iteration: 11 / 15 | lm_loss: 8.9\n"
        "Saving checkpoint at checkpoints/11\n"
    )
    (run,) = _runs(tmp_path, text)
    saves = [(e.step, e.source.line) for e in run.events_of("checkpoint_save")]
    assert saves == [(10, 3), (11, 6)]
    assert run.meta.parse[0].unrecognized == 0


def test_a_tracebacks_source_lines_are_no_events(tmp_path):
    # oumi's OOM traceback quotes ``self._hf_trainer.train(resume_from_checkpoint=...)``:
    # code under a ``File "..."`` frame, not a resume
    text = (
        "step 1 | loss 2.5\nstep 2 | loss 2.4\nTraceback (most recent call last):\n"
        '  File "/app/train.py", line 12, in <module>\n'
        "    self._hf_trainer.train(resume_from_checkpoint=resume_from_checkpoint)\n"
        '  File "/app/x.py", line 3, in train\n    save_checkpoint(model)\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    (run,) = _runs(tmp_path, text)
    assert [(e.kind, e.cause, e.source.line) for e in run.events] == [
        ("hardware_failure", "oom", 8)
    ]
    assert run.meta.parse[0].unrecognized == 0


def test_pytorch_tutorials_epoch_and_batch_in_brackets(tmp_path):
    # ``print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 300:.3f}")``: the batch
    # counts within the epoch; no record dropped as a copy of another
    rows = [(e, b) for e in (1, 2, 3) for b in (300, 600, 900)]
    text = "".join(f"[{e}, {b:5d}]: loss: 0.{9 - e}{b // 300} , acc: 9{e}.5\n" for e, b in rows)
    text += "[3 / 10]: Accuracy on test set: 96.5 %\n"
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [(e - 1) * 900 + b for e, b in rows]
    assert run.metrics.get_column("epoch").to_list() == [1.0] * 3 + [2.0] * 3 + [3.0] * 3


def test_a_counter_with_its_total_and_one_value_after_a_colon_is_the_loss(tmp_path):
    # makemore's notebooks: ``f'{i:7d}/{max_steps:7d}: {loss.item():.4f}'``
    losses = [3.3239, 2.0322, 2.5675]
    text = "".join(f"{k * 10000:7d}/ 200000: {v:.4f}\n" for k, v in enumerate(losses))
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [0, 10000, 20000]
    assert run.metrics.get_column("loss").to_list() == losses


def test_a_command_lines_save_flag_is_no_checkpoint_save(tmp_path):
    text = (
        "| epoch   1 |   200/ 2983 batches | lr 20.00 | loss  7.61\n"
        "| epoch   1 |   400/ 2983 batches | lr 20.00 | loss  7.01\n"
        "python main.py --cuda --epochs 6 --save model_RNN_TANH.pt\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.events_of("checkpoint_save") == []


def test_a_far_record_that_repeats_a_step_and_its_rounded_loss_is_kept(tmp_path):
    # two runs pasted one after the other: run 2's step 8 has run 1's loss to 3 digits
    first = [2.1, 1.9, 1.7, 1.5, 1.3, 1.2, 1.1, 1.05]
    second = [2.2, 1.95, 1.75, 1.55, 1.35, 1.25, 1.12, 1.05]
    text = "".join(f"step {s} | loss {v:.3f}\n" for s, v in enumerate(first, 1))
    text += "#### USING MPS\n"
    text += "".join(f"step {s} | loss {v:.3f}\n" for s, v in enumerate(second, 1))
    runs = _runs(tmp_path, text)
    assert [len(r.metrics) for r in runs] == [8, 8]


def test_a_log_of_a_job_that_died_before_its_first_record_is_read_for_the_crash(tmp_path):
    # start-up warnings, a bar at 0/1000, then the OOM: no record, no format's marks
    text = (
        "WARNING:accelerate.utils.other:Detected kernel version 4.18.0\n"
        "  0%|          | 0/1000 [00:00<?, ?it/s]Too many dataloader workers: 2\n"
        "Traceback (most recent call last):\n"
        '  File "/env/bin/oumi", line 8, in <module>\n    sys.exit(run())\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB.\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "text"
    assert run.metrics.height == 0
    assert [(e.kind, e.cause) for e in run.events] == [("hardware_failure", "oom")]
    assert [f.kind for f in detect(run)] == ["crash"]


def test_python_loggings_level_and_name_prefix_is_no_key(tmp_path):
    # flax's seq2seq example through absl: ``INFO:absl:[100] accuracy=0.0156, loss=0.6936``
    text = "".join(
        f"INFO:absl:[{s}] accuracy=0.0{s // 100}, loss=0.{70 - s // 100}\n" for s in (100, 200, 300)
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [100, 200, 300]
    assert run.metrics.get_column("loss").to_list() == [0.69, 0.68, 0.67]
    assert "absl" not in run.metrics.columns


def test_a_loss_alone_line_after_line_is_read_numbered(tmp_path):
    # ``print("Training loss per 100 training steps:", loss)``, and ``print("Loss:", loss)``
    for line in ("Training loss per 100 training steps: {}", "Loss: {}"):
        text = "".join(line.format(v) + "\n" for v in (0.419, 0.575, 0.459, 0.380, 0.351))
        (run,) = _runs(tmp_path, text)
        assert _steps(run) == [1, 2, 3, 4, 5]
        assert run.metrics.get_column("loss").to_list() == [0.419, 0.575, 0.459, 0.380, 0.351]
        assert "training_loss_per" not in run.metrics.columns
    # four such lines are not enough to tell
    text = "".join(f"Loss: {v}\n" for v in (0.419, 0.575, 0.459, 0.380))
    with pytest.raises(InputError):
        _runs(tmp_path, text)


def test_a_second_launch_of_one_seed_repeating_two_losses_is_no_copy(tmp_path):
    # detectron2 relaunched with the same seed: iters 19 and 39 repeat the first launch's
    # total_loss to the digit, its other measures differ
    def rec(it: int, loss: float, acc: float) -> str:
        return f"iter: {it}  total_loss: {loss}  loss_cls: 0.{it}  cls_acc: {acc}  lr: 0.002\n"

    first = [(19, 8.858, 0.8887), (39, 8.119, 0.9012)] + [
        (i, 7.0 - i / 100, 0.91) for i in range(59, 500, 20)
    ]
    second = [(19, 8.858, 0.8926), (39, 8.119, 0.9034), (59, 7.5, 0.905), (79, 7.2, 0.91)]
    text = "".join(rec(*r) for r in first) + "".join(rec(*r) for r in second)
    runs = _runs(tmp_path, text)
    assert [len(r.metrics) for r in runs] == [len(first), len(second)]


def test_evaluation_settings_of_a_pasted_config_are_no_validations(tmp_path):
    # LLaMA-Factory's YAML above its dicts; ms-swift's command line
    text = (
        "val_size: 0\neval_steps: 50000000\n  --eval_steps 50 \\\n"
        + "".join(
            f"{{'loss': {2.5 - k / 10:.2f}, 'grad_norm': 1.{k}, 'learning_rate': 5e-06, "
            f"'epoch': 0.0{k}}}\n"
            for k in range(1, 5)
        )
        + "{'eval_loss': 2.01, 'eval_runtime': 3.2, 'epoch': 0.04}\n"
    )
    (run,) = _runs(tmp_path, text)
    assert [(e.kind, e.source.line) for e in run.events if e.kind == "validation"] == [
        ("validation", 8)
    ]


def test_rays_worker_prefix_and_its_dedup_note_are_no_part_of_a_record(tmp_path):
    # MaxText on Ray: ``(run_maxtext_train pid=78967, ip=10.130.0.11) completed step: 4, ...
    # loss: 0.000 [repeated 2x across cluster]``
    def line(s: int, loss: float, rep: str = "") -> str:
        return (
            f"(run_maxtext_train pid=78967, ip=10.130.0.11) completed step: {s}, seconds: 1.1, "
            f"TFLOP/s/device: 138.8, loss: {loss:.3f}{rep}\n"
        )

    text = line(0, 12.066) + line(1, 11.2, " [repeated 2x across cluster]") + line(2, 10.5)
    (run,) = _runs(tmp_path, text)
    assert run.metrics.select("step", "loss").rows() == [(0, 12.066), (1, 11.2), (2, 10.5)]
    assert not {"pid", "ip", "run_maxtext_train_pid"} & set(run.metrics.columns)


def test_an_exception_python_ignored_after_training_is_no_crash(tmp_path):
    # torchtitan's checkpointer's ``__del__`` at interpreter shutdown, after the last step
    text = "".join(f"step: {s}  loss: {3 - s / 1000:.4f}\n" for s in (4998, 4999, 5000))
    text += (
        "Training completed\n"
        "Exception ignored while calling deallocator <function CheckpointManager.__del__>:\n"
        "Traceback (most recent call last):\n"
        '  File "/torchtitan/components/checkpoint.py", line 405, in __del__\n'
        "    self.close()\n"
        "PythonFinalizationError: cannot join thread at interpreter shutdown\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.events_of("hardware_failure") == []
    assert [f for f in detect(run) if f.kind == "crash"] == []
    # ``Training completed`` and the ``Exception ignored`` line are left for a reader
    assert run.meta.parse[0].first_unrecognized == [4, 5]


def test_losses_keyed_by_one_letter_read_their_total_and_apex_overflows_the_step_after(
    tmp_path,
):
    # YOLACT's train.py: ``[epoch] iteration ||`` then a capital letter per loss term and
    # ``T`` their total; apex's overflow message between two prints (every 10 iterations)
    # skipped the iteration after the first of them; a paste opened an inline-code span
    # on the first line
    rec = "[  1]    {i} || B: 5.5{d} | C: 3.1{d} | M: 7.{d} | S: 1.2{d} | T: {t} || timer: 0.3\n"
    over = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {s}\n"
    text = "`" + "".join(rec.format(i=100 + 10 * k, d=k, t=17.0 + k / 10) for k in range(4))
    text += over.format(s=1.52587890625e-05)
    text += "".join(rec.format(i=140 + 10 * k, d=k, t=17.4 + k / 10) for k in range(2))
    text += over.format(s=7.62939453125e-06)
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [100, 110, 120, 130, 140, 150]
    assert run.metrics.get_column("loss").to_list() == [17.0, 17.1, 17.2, 17.3, 17.4, 17.5]
    assert run.metrics.get_column("b").to_list()[:2] == [5.50, 5.51]
    overflows = run.events_of("overflow_skip")
    assert [(e.step, e.new_scale) for e in overflows] == [
        (131, 1.52587890625e-05),
        (151, 7.62939453125e-06),
    ]
    assert (run.meta.parse[0].records, run.meta.parse[0].unrecognized) == (6, 0)


def test_detectron2s_start_of_training_is_a_launch(tmp_path):
    from logbook.detectors import detect

    rec = (
        "[12/22 19:{m}:00] d2.utils.events INFO:  eta: 0:00:19  iter: {i}  total_loss: {x}"
        "  time: 0.9  data_time: 0.01  lr: 0.002  max_mem: 1308M\n"
    )
    start = "[12/22 19:{m}:00] d2.engine.train_loop INFO: Starting training from iteration {i}\n"
    crash = (
        "[12/22 19:15:44] d2.engine.train_loop ERROR: Exception during training:\n"
        "Traceback (most recent call last):\n"
        '  File "train_net.py", line 10, in main\n'
        "RuntimeError: Expected size for first two dimensions of batch2 tensor\n"
    )
    # a launch that crashed at its first iteration, then one that trained from 0
    text = start.format(m=15, i=0) + crash + start.format(m=31, i=0)
    text += rec.format(m=31, i=19, x=5.455) + rec.format(m=32, i=39, x=4.823)
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [19, 39]
    (restart,) = run.events_of("restart")
    assert (restart.resume_step, restart.cause) == (0, "exception")
    found = [f for f in detect(run) if f.kind == "restart"]
    assert [(f.step, f.severity, f.evidence["cause"]) for f in found] == [
        (19, "warning", "exception")
    ]
    # a resume from a checkpoint: the first iteration it runs is 5000
    text = start.format(m=10, i=0) + rec.format(m=11, i=4979, x=1.5)
    text += rec.format(m=12, i=4999, x=1.4) + start.format(m=20, i=5000)
    text += rec.format(m=21, i=5019, x=1.3)
    (run,) = _runs(tmp_path, text)
    (restart,) = run.events_of("restart")
    assert (restart.resume_step, restart.last_step_before) == (4999, 4999)


def _dlll(t: float, step, data: str) -> str:
    stamp = f"2020-04-21 06:{int(t) // 60:02d}:{int(t) % 60:02d}.000000"
    s = step if isinstance(step, str) else json.dumps(step)
    return (
        f'DLLL {{"timestamp": "{1587450000 + t}", "datetime": "{stamp}", "elapsedtime": '
        f'"{t}", "type": "LOG", "step": {s}, "data": {data}}}\n'
    )


def test_dlloggers_json_backend_keeps_a_step_retried_after_an_overflow(tmp_path):
    # NVIDIA's BERT pretraining (dllogger.json): the loss scale is logged alone when it
    # backs off, and the skipped step is printed again; settings are no records
    text = _dlll(0, '"PARAMETER"', '{"Config": ["Namespace(resume_from_checkpoint=False)"]}')
    text += _dlll(1, '"PARAMETER"', '{"learning_rate": 0.004}')
    rec = '{{"average_loss": {a}, "step_loss": {x}, "learning_rate": {lr}}}'
    text += _dlll(2, '"PARAMETER"', '{"loss_scale": 524288.0}')
    text += _dlll(3, [0, 0], rec.format(a=3.62, x=3.7, lr=2e-05))
    text += _dlll(4, '"PARAMETER"', '{"loss_scale": 262144.0}')
    text += _dlll(5, [0, 0], rec.format(a=3.58, x=3.38, lr=2e-05))
    for k in range(1, 6):
        text += _dlll(5 + k, [0, k], rec.format(a=3.5, x=3.4 - k / 10, lr=2e-05 * (k + 1)))
    (run,) = _runs(tmp_path, text, "dllogger.json.log")
    assert run.meta.format == "dllogger"
    assert _steps(run) == [0, 0, 1, 2, 3, 4, 5]
    assert run.metrics.get_column("loss").to_list()[:3] == [3.7, 3.38, 3.3]
    assert run.events_of("restart") == []
    assert [e.new_scale for e in run.events_of("overflow_skip")] == [524288.0, 262144.0]
    stats = run.meta.parse[0]
    assert (stats.records, stats.event_lines, stats.ignored, stats.unrecognized) == (7, 2, 2, 0)
    from logbook.detectors import detect

    assert [f.kind for f in detect(run) if f.severity != "info"] == []


def test_a_step_printed_again_at_another_loss_scale_is_that_step_retried(tmp_path):
    # TensorFlow BERT (DLLogger stdout): iteration 1 printed at each scale it tried
    rec = (
        "DLL 2020-12-17 17:{m:02d}:00.000000 - Iteration: {i}  total_loss : {x}  "
        "learning_rate : 0.0  loss_scaler : {s}\n"
    )
    scales = [4294967296, 2147483648, 1073741824]
    text = "".join(rec.format(m=k, i=1, x=11.1 + k / 100, s=s) for k, s in enumerate(scales))
    text += "".join(rec.format(m=3 + k, i=2 + k, x=11.0, s=1073741824) for k in range(3))
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 1, 1, 2, 3, 4]
    assert run.metrics.get_column("loss_scale").to_list()[:3] == [float(s) for s in scales]
    assert run.events_of("restart") == []
    assert run.metrics.get_column("segment").unique().to_list() == [0]


def test_steps_that_go_back_after_the_script_said_it_finished_are_another_run(tmp_path):
    # DeepSpeed's CIFAR example pasted twice: ``[epoch, batch] loss:``, then
    # ``Finished Training``; the second run's batches start lower than the first's last
    one = "".join(f"[30,  {b}] loss: 1.3{b // 100 % 10}\n" for b in range(2200, 3200, 100))
    two = "".join(f"[30,  {b}] loss: 1.4{b // 100 % 10}\n" for b in range(2700, 3200, 100))
    text = one + "Finished Training\nAccuracy of the network on the 10000 test images: 46 %\n"
    text += two + "Finished Training\n"
    first, second = _runs(tmp_path, text)
    assert (_steps(first)[0], _steps(first)[-1], len(_steps(first))) == (2200, 3100, 10)
    assert _steps(second) == [2700, 2800, 2900, 3000, 3100]
    assert first.events_of("restart") == second.events_of("restart") == []


def test_llamafactorys_closing_row_with_its_throughput_is_no_record(tmp_path):
    row = (
        '{{"current_steps": {s}, "total_steps": 30, "loss": {x}, "learning_rate": 1e-05, '
        '"epoch": {e}, "percentage": {p}, "elapsed_time": "0:01:00", "remaining_time": '
        '"0:00:00", "throughput": "512.00", "total_tokens": {t}}}\n'
    )
    text = "".join(
        row.format(s=s, x=1.5 - s / 100, e=s / 30, p=s / 0.3, t=100 * s) for s in (10, 20, 30)
    )
    text += (
        '{"current_steps": 30, "total_steps": 30, "epoch": 1.0, "percentage": 100.0, '
        '"elapsed_time": "0:03:00", "remaining_time": "0:00:00", "throughput": "0.00", '
        '"total_tokens": 0}\n'
    )
    (run,) = _runs(tmp_path, text, "trainer_log.jsonl")
    assert _steps(run) == [10, 20, 30]


def test_a_traceback_and_an_overflow_glued_onto_a_bar_are_events(tmp_path):
    from logbook.detectors import detect

    bar = "Steps:   0%|          | {n}/6000 [00:5{n}<4:54:46,  2.96s/it, lr=0, step_loss=nan]"
    over = (
        "[2025-08-27 10:12:2{n},030] [INFO] [loss_scaler.py:184:update_scale] [deepspeed] "
        "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a}, reducing to {b}\n"
    )
    text = over.format(n=2, a=4, b=2) + bar.format(n=6) + over.format(n=5, a=2, b=1)
    text += bar.format(n=7) + "[rank0]: Traceback (most recent call last):\n"
    text += '[rank0]:   File "train.py", line 999, in <module>\n[rank0]:     main()\n'
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [6, 7]
    assert [(e.step, e.new_scale) for e in run.events_of("overflow_skip")] == [(6, 2.0), (7, 1.0)]
    (crash,) = [f for f in detect(run) if f.kind == "crash"]
    assert (crash.severity, crash.step, crash.evidence["cause"]) == ("critical", 7, "exception")


def test_a_nan_loss_warning_before_a_print_is_that_steps_non_finite_loss(tmp_path):
    # deepspeech.pytorch zeroes a NaN loss and says so before the batch's line
    rec = "Epoch: [1][{i}/9000]\tTime 0.9 (0.9)\tData 0.01 (0.01)\tLoss {x:.4f} ({x:.4f})\t\n"
    text = rec.format(i=4690, x=120.5) + rec.format(i=4691, x=118.2)
    text += "WARNING: received a nan loss, setting loss value to 0\nSkipping grad update\n"
    text += rec.format(i=4692, x=0.0) + rec.format(i=4693, x=117.9)
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [4690, 4691, 4692, 4693]
    assert [(e.step, e.metric, e.value) for e in run.events_of("nonfinite")] == [
        (4692, "loss", "nan")
    ]


def test_a_kill_or_a_rich_traceback_glued_onto_the_last_bar_ends_the_run(tmp_path):
    bar = "{n}/450 [====>....] - ETA: 17:28 - loss: 20.{n} - location_loss: 5.3367"
    text = "\n".join(bar.format(n=n) for n in (317, 318)) + "\n" + bar.format(n=319) + "Killed\n"
    (run,) = _runs(tmp_path, text)
    (crash,) = [f for f in detect(run) if f.kind == "crash"]
    assert (crash.step, crash.evidence["cause"]) == (319, "sigkill")
    dicts = "".join(
        f"{{'loss': 1.{k}, 'learning_rate': 2.9e-04, 'epoch': 0.0{k}}}\n" for k in (3, 5)
    )
    box = (
        "  2%|##     | 50/2019 [24:43<15:52:05, 29.01s/it\u256d\n"
        + "\u2500" * 20
        + " Traceback (most recent call last) "
        + "\u2500" * 20
        + "\u256e\n\u2502 /home/user/finetune.py:271 in <module>  \u2502\n"
    )
    (run,) = _runs(tmp_path, dicts + box, "y.log")
    (crash,) = [f for f in detect(run) if f.kind == "crash"]
    assert (crash.severity, crash.evidence["cause"]) == ("critical", "exception")


def test_a_log_without_any_loss_is_read_from_its_steps_and_values(tmp_path):
    text = (
        "completed step: 0, seconds: 46.218, TFLOP/s/device: 156.914\n"
        "completed step: 1, seconds: 10.315, TFLOP/s/device: 703.074\n"
        "completed step: 2, seconds: 10.106, TFLOP/s/device: 717.539\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.meta.format == "text"
    assert _steps(run) == [0, 1, 2]
    assert run.metrics.get_column("step_time_s").to_list() == [46.218, 10.315, 10.106]
    assert any(c.startswith("no loss in this log") for c in run.meta.caveats)


def test_numbers_of_other_lines_without_a_loss_make_no_records(tmp_path):
    # a traceback's line numbers go any way: no series, no records
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/a.py", line 80, in <module>\n'
        '  File "/opt/b.py", line 12, in train\n'
        '  File "/opt/c.py", line 431, in step\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.height == 0
    assert [e.kind for e in run.events] == ["hardware_failure"]


def test_a_bracketed_batch_after_the_epoch_is_the_step(tmp_path):
    # MXNet's Speedometer; ``batch 32`` elsewhere stays a size
    text = "".join(
        f"Node[0] Epoch[2] Batch [{b}]\tSpeed: 61.70 samples/sec\tTrain-accuracy=0.41{b}\n"
        for b in (50, 100, 150)
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [50, 100, 150]
    assert run.metrics.get_column("epoch").to_list() == [2.0, 2.0, 2.0]


def test_training_arguments_on_one_line_are_read_and_ignored(tmp_path):
    # transformers 3 printed the dataclass on one line
    head = (
        "Training/evaluation parameters TrainingArguments(output_dir='out', "
        "learning_rate=3e-05, max_steps=-1, warmup_steps=500, fp16=True, seed=7)\n"
    )
    dicts = "".join(
        f"{{'loss': {x}, 'learning_rate': 3e-05, 'epoch': 0.{i}}}\n"
        for i, x in enumerate((2.5, 2.4, 2.3), 1)
    )
    (run,) = _runs(tmp_path, head + dicts)
    assert run.meta.model_extra["arguments"] == {
        "lr": 3e-05,
        "train_iters": -1,
        "lr_warmup_iters": 500,
        "fp16": True,
        "seed": 7,
    }
    (st,) = run.meta.parse
    assert (st.records, st.ignored, st.unrecognized) == (3, 1, 0)
    assert run.events_of("lr_change") == []  # one launch: nothing changed


def test_a_log_in_comments_is_read_behind_its_marks(tmp_path):
    # a trainer's output pasted into a shell script as its expected output
    text = "".join(
        f"# completed step: {s}, seconds: 1.5, TFLOP/s/device: 80.1, loss: {9.0 - s / 10}\n"
        for s in range(4)
    )
    (run,) = _runs(tmp_path, "#!/bin/bash\n# expected output:\n" + text)
    assert _steps(run) == [0, 1, 2, 3]
    assert run.metrics.get_column("loss").to_list() == [9.0, 8.9, 8.8, 8.7]
    assert "a log in comments: each line's leading '#' taken off" in run.meta.caveats


def test_step_keys_of_jax_trainers(tmp_path):
    pax = "".join(f"[PAX STATUS] step_i: {s}, training loss: 6.{s}\n" for s in (100, 200, 300))
    (run,) = _runs(tmp_path, pax, "pax.log")
    assert _steps(run) == [100, 200, 300]
    flax = "".join(
        f"I0325 14:00:22.976243 130295 train.py:652] Finished training step {s}. "
        f"Batch size: 512, Loss: 10.9{s}, LR: 0.00000\n"
        for s in (0, 1, 2)
    )
    (run,) = _runs(tmp_path, flax, "flax.log")
    assert _steps(run) == [0, 1, 2]
    assert run.metrics.get_column("loss").to_list() == [10.9, 10.91, 10.92]


def test_a_bars_percentage_after_a_phase_word_is_no_epoch(tmp_path):
    # Composer's bar: ``train 21%|...| 161543/770000 [...]`` is batch 161543, not epoch 21
    text = "".join(
        f"[0]:train 21%|#####  | {b}/770000 [29:39:25<397:31:10, 2.35s/ba, "
        f"loss/train/total=0.1{b % 10}]\n"
        for b in (161541, 161542, 161543)
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [161541, 161542, 161543]
    assert "epoch" not in run.metrics.columns or run.metrics.get_column("epoch").null_count() == 3


def test_an_epoch_of_its_total_is_no_step(tmp_path):
    # PaddleOCR logs several records an epoch and prints no step: they are numbered
    text = "".join(
        f"[2025/07/22 00:{10 + k}:40] ppocr INFO: epoch: [{e}/10], lr: 0.000024, "
        f"loss: {30 - k}.5, eta: 4:30:02\n"
        for k, e in enumerate((1, 1, 1, 2, 2))
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2, 3, 4, 5]
    assert run.metrics.get_column("epoch").to_list() == [1.0, 1.0, 1.0, 2.0, 2.0]


def test_paddles_scaler_message_is_an_overflow(tmp_path):
    text = (
        "Epoch: [0] [100/268] learning_rate: 0.000019 loss: 5.192295\n"
        "Epoch: [0] [200/268] learning_rate: 0.000037 loss: 4.870127\n"
        "Found inf or nan, current scale is: 1024.0, decrease to: 1024.0*0.5\n"
        "Epoch: [1] [  0/268] learning_rate: 0.000050 loss: 4.603556\n"
    )
    (run,) = _runs(tmp_path, text)
    (skip,) = run.events_of("overflow_skip")
    assert (skip.step, skip.source.line) == (201, 3)


def test_a_listed_batch_after_the_epoch_is_the_step(tmp_path):
    # icefall: ``Epoch 0, batch 500, loss[...]``; ``batch size: 8`` stays a size
    text = "".join(
        f"2022-04-21 06:21:16,518 INFO [train.py:518] Epoch 0, batch {b}, "
        f"loss[ctc_loss=0.76, loss=0.{b // 10}, over 2223 frames.], batch size: 8\n"
        for b in (500, 550, 600)
    )
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [500, 550, 600]
    assert run.metrics.get_column("loss").to_list() == [0.5, 0.55, 0.6]


def test_a_log_of_epoch_lines_takes_the_epoch_as_its_step(tmp_path):
    text = "".join(f"Epoch {e}, train loss: 0.{10 - e}, val loss: 0.9{e}\n" for e in (1, 2, 3))
    (run,) = _runs(tmp_path, text)
    assert _steps(run) == [1, 2, 3]
    assert run.metrics.get_column("loss").to_list() == [0.9, 0.8, 0.7]
    # beside records that count steps, such a line sums its epoch up: no record
    steps = "".join(f"| epoch 010  {b}000 / 8223 loss=1.2{b} (1.50), lr=0.001\n" for b in (1, 2))
    summary = "| epoch 010 | train loss 1.44 | train ppl 2.72 | lr 0.001000\n"
    (run,) = _runs(tmp_path, steps + summary, "fairseq.log")
    assert run.metrics.height == 2
    (st,) = run.meta.parse
    assert (st.records, st.ignored, st.unrecognized) == (2, 1, 0)


def test_an_epoch_length_the_epoch_summary_states_counts_the_steps(tmp_path):
    epochs = []
    for e in (1, 2, 3):
        epochs += [f"\titers: {i}, epoch: {e} | loss: 0.{50 - e}{i // 100}" for i in (100, 200)]
        epochs += [
            f"\tspeed: 1.11s/iter; left time: 700.{e}s",
            f"Epoch: {e}, Steps: 250 | Train Loss: 0.4{e} Vali Loss: 0.5{e} Test Loss: 0.6{e}",
        ]
    (run,) = _runs(tmp_path, "\n".join(epochs) + "\n")
    # (epoch - 1) x 250 + iters, not x 200 (the largest printed)
    assert _steps(run) == [100, 200, 350, 450, 600, 700]
    assert (
        "the step counts within each epoch: counted over the epochs with 250 steps an "
        "epoch (as the log states it)"
    ) in run.meta.caveats
    # a statement that the printed steps pass is no epoch length
    (run,) = _runs(tmp_path, "\n".join(epochs).replace("Steps: 250", "Steps: 150") + "\n")
    assert _steps(run) == [100, 200, 300, 400, 500, 600]


def test_a_typed_out_loss_list_and_two_runs_whose_first_steps_agree(tmp_path):
    first = ["iter 1: 1.764603", "iter 2: 1.693627", "iter 3: 1.751950", "iter 4: 1.745651"]
    second = ["iter 1: 1.764603", "iter 2: 1.693627", "iter 3: 1.751948", "iter 4: 1.745644"]
    text = "\n".join(["----", "Overlapped", "----", *first, "", "----", "Plain", "----", *second])
    runs = _runs(tmp_path, text + "\n")
    # the bare value after ``iter N:`` is the loss; the second run is no per-rank copy
    assert [r.metrics.select("step", "loss").rows() for r in runs] == [
        [(1, 1.764603), (2, 1.693627), (3, 1.75195), (4, 1.745651)],
        [(1, 1.764603), (2, 1.693627), (3, 1.751948), (4, 1.745644)],
    ]
    assert all(not r.events_of("restart") for r in runs)
    # a rank's block that repeats the other's to its end is still one copy
    (run,) = _runs(tmp_path, "\n".join([*first, *first]) + "\n")
    assert _steps(run) == [1, 2, 3, 4]


def test_a_script_that_stops_on_a_nan_loss_gives_a_nonfinite_step(tmp_path):
    text = (
        "INFO:tensorflow:loss = 11.222988, step = 1\n"
        "INFO:tensorflow:loss = 10.9, step = 2\n"
        "ERROR:tensorflow:Model diverged with loss = NaN.\n"
    )
    (run,) = _runs(tmp_path, text)
    found = {(f.kind, f.step, f.severity) for f in detect(run)}
    assert found == {("nonfinite", 3, "critical"), ("crash", 2, "critical")}
    # the record before it already NaN: that is the step the message is about
    (run,) = _runs(tmp_path, text.replace("10.9", "nan"))
    assert {(f.kind, f.step) for f in detect(run) if f.kind == "nonfinite"} == {("nonfinite", 2)}


def test_a_tensorboard_csv_export_of_one_tag(tmp_path):
    rows = ["Wall time,Step,Value", "1575618724.5,43,2.84", "1575618728.5,46,2.80"]
    rows += ["1575618732.5,49,2.78"]
    (run,) = _runs(tmp_path, "\n".join(rows) + "\n", "run-train-tag-epoch_loss.csv")
    assert run.metrics.select("step", "loss").rows() == [(43, 2.84), (46, 2.8), (49, 2.78)]
    assert run.metrics.get_column("time")[0] == datetime(2019, 12, 6, 7, 52, 4, 500000, UTC)
    assert "a TensorBoard export of the tag 'epoch_loss': its Value read as 'loss'" in (
        run.meta.caveats
    )


def test_a_step_counter_that_starts_over_while_the_loss_goes_on_is_one_run(tmp_path):
    head = [f"step {s} | loss {v}" for s, v in ((40, 2.9), (50, 1.2), (60, 0.64))]
    goes_on = [f"step {s} | loss {v}" for s, v in ((10, 0.63), (20, 0.61))]
    (run,) = _runs(tmp_path, "\n".join(head + goes_on) + "\n")
    assert _steps(run) == [40, 50, 60, 10, 20] and len(run.events_of("restart")) == 1
    # from scratch again (the loss back at its start): another run
    fresh = [f"step {s} | loss {v}" for s, v in ((10, 2.95), (20, 2.5))]
    assert len(_runs(tmp_path, "\n".join(head + fresh) + "\n")) == 2


def test_a_bar_with_an_overflow_message_glued_on_is_no_record(tmp_path):
    bar = "  0%|          | {n}/63645 [00:19<37:53:00,  2.14s/it]"
    msg = (
        "[2021-06-08 12:02:45,001] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] "
        "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a}.0, reducing to {b}.0"
    )
    text = "".join(
        bar.format(n=n) + msg.format(a=2 ** (33 - n), b=2 ** (32 - n)) + "\n" for n in (9, 10, 11)
    )
    (run,) = _runs(tmp_path, text)
    assert run.metrics.height == 0
    assert [(e.kind, e.step) for e in run.events] == [("overflow_skip", s) for s in (10, 11, 12)]
    (stats,) = run.meta.parse
    assert (stats.record_lines, stats.event_lines, stats.unrecognized) == (0, 3, 0)


def test_marian_updates_and_cost_and_an_epoch_counted_from_zero_of_its_total(tmp_path):
    marian = (
        "[2021-05-28 19:17:52] Ep. 1 : Up. 500 : Sen. 63,614 : Cost 5.41353178 * 1,857,078 "
        "@ 4,132 after 1,857,078 : Time 239.44s : 7755.77 words/s : L.r. 3.0000e-04\n"
        "[2021-05-28 19:21:49] Ep. 1 : Up. 1000 : Sen. 126,940 : Cost 4.52651596 * 1,848,796 "
        "@ 3,867 after 3,705,874 : Time 236.91s : 7803.91 words/s : L.r. 3.0000e-04\n"
    )
    (run,) = _runs(tmp_path, marian)
    assert run.metrics.select("step", "epoch", "loss", "lr").rows() == [
        (500, 1.0, 5.41353178, 3e-4),
        (1000, 1.0, 4.52651596, 3e-4),
    ]
    allen = (
        "2017-10-14 16:48:27,962 - INFO - allennlp.training.trainer - Epoch 0/139\n"
        "2017-10-14 16:48:48,950 - INFO - allennlp.training.trainer - Batch 1/17168: "
        "accuracy: 0.25, loss: 6.66 ||\n"
        "2017-10-14 16:48:58,960 - INFO - allennlp.training.trainer - Batch 567/17168: "
        "accuracy: 0.42, loss: 1.32 ||\n"
    )
    (run,) = _runs(tmp_path, allen)
    assert _steps(run) == [1, 567]  # epoch 0 of 139 is the first: no steps below 1


def test_a_loss_rounded_to_its_last_digit_does_not_spike_by_rounding(tmp_path):
    rounded = [0.0003, 0.0002, 0.0002] + [0.0001, 0.0002, 0.0001, 0.0001] * 8 + [0.0002]
    text = "".join(f"step {10 * (i + 1)} | loss {v:.4f}\n" for i, v in enumerate(rounded))
    (run,) = _runs(tmp_path, text)
    assert [f for f in detect(run) if f.kind == "loss_spike"] == []
    # five units of it are a spike still
    (run,) = _runs(tmp_path, text.replace("loss 0.0002\n", "loss 0.0006\n"))
    assert [f.step for f in detect(run) if f.kind == "loss_spike"] != []


def test_a_log_without_a_loss_is_read_from_the_values_most_of_its_lines_print(tmp_path):
    rec = "[INFO:sockeye.training] Epoch[1] Batch [{b}]   Speed: 185.09 samples/sec"
    rec += "     perplexity={p}"
    lines = [rec.format(b=b, p=18 - b / 1000) for b in (5800, 5850, 5900, 5950, 6000)]
    lines += [
        "[INFO:sockeye.training] Checkpoint [6]  Updates=6000 Epoch=1 Samples=633045",
        "[INFO:sockeye.utils] GPU 1: 8599/11171 MB (76.98%)",
    ]
    (run,) = _runs(tmp_path, "\n".join(lines) + "\n")
    assert _steps(run) == [5800, 5850, 5900, 5950, 6000]
    assert run.metrics.get_column("perplexity").to_list() == [12.2, 12.15, 12.1, 12.05, 12.0]
    (stats,) = run.meta.parse
    assert (stats.records, stats.unrecognized) == (5, 2)
