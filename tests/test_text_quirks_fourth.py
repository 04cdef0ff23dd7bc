"""Readings added for the fourth round of real excerpts: which counter is the step,
an epoch of its total as the step, dicts that tell their run time, W&B's trainer step,
FlagScale's golden values, Git LFS pointers, crash and damaged-time cases."""

from __future__ import annotations

import json

import parsers
from tests._cli import invoke
from tests._rows import column as _col
from tests._rows import one_run as _one


def test_a_global_step_beside_the_step_within_the_epoch_is_the_step(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"   | > Step:{s - 1}/281  GlobalStep:{s}  TotalLoss:0.2{s % 10}  LR:0.000100\n"
            for s in (210, 220, 230)
        )
    )
    run = _one(p)
    assert _col(run, "step") == [210, 220, 230]
    assert _col(run, "local_step") == [209.0, 219.0, 229.0]


def test_a_global_batch_index_wins_over_the_batch_within_the_epoch(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"2025-10-27 17:32:39,748 INFO [train.py:731] Epoch 1, batch {b - 1}, "
            f"global_batch_idx: {b}, batch size: 25, loss[loss=0.0{b}, over 17994.00 "
            "frames. ], cur_lr: 1.00e-04\n"
            for b in (50, 100, 150)
        )
    )
    run = _one(p)
    assert _col(run, "step") == [50, 100, 150]
    assert _col(run, "batch") == [49.0, 99.0, 149.0]


def test_an_epoch_of_its_total_is_the_step_of_one_line_an_epoch(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"Epoch [{e}/1000], Train Loss: 1.{e}, Train L1 Loss: 0.{e}\n"
            f"Epoch [{e}/1000], Validation Loss: 2.{e}, Validation L1: 0.5\n"
            for e in (613, 614, 615)
        )
    )
    run = _one(p)
    assert _col(run, "step") == [613, 614, 615]
    assert _col(run, "loss") == [1.613, 1.614, 1.615]


def test_epochs_of_their_total_over_several_lines_each_are_numbered(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"ppocr INFO: epoch: [{1 + i // 2}/10], lr: 0.0001, loss: {9 - i}.5\n" for i in range(6)
        )
    )
    run = _one(p)
    assert _col(run, "step") == [1, 2, 3, 4, 5, 6]
    assert _col(run, "epoch") == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_a_dict_with_a_loss_and_the_run_time_so_far_is_a_record(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "{'loss': '14.88', 'grad_norm': '2.578', 'learning_rate': '0.000156', "
        "'epoch': '0.00748', 'train_runtime': '110.7'}\n"
        "{'loss': '14.64', 'grad_norm': '2.938', 'learning_rate': '0.000144', "
        "'epoch': '0.007895', 'train_runtime': '112.2'}\n"
        "{'train_runtime': '120.0', 'train_samples_per_second': 1.5, 'train_loss': 14.7}\n"
    )
    run = _one(p)
    assert _col(run, "step") == [1, 2]
    assert _col(run, "loss") == [14.88, 14.64]
    assert _col(run, "lr") == [0.000156, 0.000144]


def test_a_wandb_summary_takes_the_trainers_step_not_wandbs(tmp_path):
    p = tmp_path / "wandb-summary.json"
    p.write_text(json.dumps({"_step": 17294, "train/global_step": 960, "train/loss": 0.25}))
    run = _one(p)
    assert _col(run, "step") == [960]
    assert _col(run, "loss") == [0.25]


def test_flagscale_golden_values_without_a_start_count_from_step_one(tmp_path):
    p = tmp_path / "results_gold.json"
    p.write_text('{"lm loss:": {"values": [12.3, 12.4, 18.6, 13.8]}}')
    assert parsers.sniff(p) == "megatron-golden"
    run = _one(p)
    assert _col(run, "step") == [1, 2, 3, 4]
    assert _col(run, "loss") == [12.3, 12.4, 18.6, 13.8]


def test_a_git_lfs_pointer_is_refused_with_what_to_do(tmp_path, monkeypatch, capsys):
    p = tmp_path / "trainer_log.jsonl"
    p.write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:9fc79f631dd585476c0927dd027d7e7ddab36c4b4de8285ca738a7137eaea27b\n"
        "size 45778\n"
    )
    code, out, err = invoke(monkeypatch, capsys, "detect", str(p))
    assert code == 2
    assert err.strip().endswith(
        "a Git LFS pointer, not the log itself (fetch the file: git lfs pull)"
    )
    assert len(err.strip().splitlines()) == 1


def test_json_objects_without_a_number_are_no_records_and_no_crash(tmp_path, monkeypatch, capsys):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": {"values": [1, 2]}}\n{"b": [3]}\n')
    code, out, _ = invoke(monkeypatch, capsys, "parse", str(p))
    assert code == 0
    assert "2 lines = 0 record + 0 event + 0 continuation + 2 ignored + 0 unrecognized" in out


def test_detectron2s_exception_during_training_is_a_crash(tmp_path):
    p = tmp_path / "log.txt"
    p.write_text(
        "[04/27 13:03:34 d2.utils.events]:  eta: 4:00:48  iter: 319  total_loss: 2.127  lr: 0.01\n"
        "[04/27 13:03:39 d2.utils.events]:  eta: 4:01:09  iter: 339  total_loss: 2.429  lr: 0.01\n"
        "ERROR [04/27 13:03:54 d2.engine.train_loop]: Exception during training:\n"
    )
    run = _one(p)
    (crash,) = run.events_of("hardware_failure")
    assert (crash.step, crash.cause) == (339, "exception")


def test_tianshou_env_step_is_the_step(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"Epoch #{e}: 50001it [00:40, 1244.54it/s, env_step={e * 50000}, len=200, "
            f"loss=-0.5{e}, n/ep=7, rew=200.00]\n"
            for e in (1, 2, 3)
        )
    )
    assert _col(_one(p), "step") == [50000, 100000, 150000]


def test_an_mlflow_time_beyond_the_calendar_is_no_time(tmp_path, monkeypatch, capsys):
    p = tmp_path / "loss"
    p.write_text(
        "1628697792090 3.3 0\n1628697795789 2.9 1\n1628697806972000 2.3 2\n1628697810423 2.2 3\n"
    )
    run = _one(p)
    assert _col(run, "step") == [0, 1, 2, 3]
    assert _col(run, "time")[2] is None
    code, _, err = invoke(monkeypatch, capsys, "detect", str(p))
    assert code == 0 and "internal error" not in err


def test_a_planned_total_beyond_64_bits_is_no_plan_and_no_crash(tmp_path, monkeypatch, capsys):
    p = tmp_path / "train.log"
    total = "9" * 5000
    p.write_text(
        f" iteration        1/{total} | lm loss: 1.0E+01 | loss scale: 4096.0 |\n"
        " iteration        2/ 1000 | lm loss: 9.5E+00 | loss scale: 4096.0 |\n"
        f" iteration        3/{total} | lm loss: 9.0E+00 | loss scale: 4096.0 |\n"
    )
    code, out, err = invoke(monkeypatch, capsys, "parse", str(p))
    assert code == 0 and "internal error" not in err
    assert "3 records" in out


def test_a_yolo_row_with_a_huge_image_size_is_no_row(tmp_path, monkeypatch, capsys):
    row = "      {e}/29     1.86G   0.09854   0.09318         0    0.1917        24       {s}"
    rest = "         0         0  0.004895 0.0009547   0.09176   0.05526         0\n"
    p = tmp_path / "results.txt"
    p.write_text("".join(row.format(e=e, s=416) + rest for e in range(3)))
    p.write_text(p.read_text() + row.format(e=3, s="4" * 5000) + rest)
    code, out, err = invoke(monkeypatch, capsys, "parse", str(p))
    assert code == 0 and "internal error" not in err
    assert "4 lines = 3 record + 0 event + 0 continuation + 0 ignored + 1 unrecognized" in out
