"""Darknet, key-value tables (OpenAI's logger), MLflow's file store and Sacred's
metrics.json: each read to exact values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import parsers
from logbook.errors import InputError
from tests._cli import invoke


def _one(path: Path):
    (run,) = parsers.read_logs(path)
    return run


def _col(run, name: str) -> list:
    return run.metrics.get_column(name).to_list()


def test_darknet_iteration_lines_between_region_lines(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "Region 82 Avg IOU: 0.512, Class: 0.48, Obj: 0.31, No Obj: 0.004, .5R: 0.5, count: 8\n"
        " 181: 590.941345, 834.728516 avg loss, 0.000010 rate, 1.937414 seconds, "
        "11584 images, 17.973280 hours left\n"
        "Region 94 Avg IOU: 0.401, Class: 0.52, Obj: 0.22, No Obj: 0.003, .5R: 0.3, count: 5\n"
        " 182: -nan, -nan avg loss, 0.000010 rate, 2.011170 seconds, 11648 images\n"
        " 183: 12.5, 11.0 avg, 0.001000 rate, 2.05 seconds, 11712 images\n"
    )
    assert parsers.sniff(p) == "darknet"
    run = _one(p)
    assert _col(run, "step") == [181, 182, 183]
    loss = _col(run, "loss")
    assert loss[0] == 590.941345 and math.isnan(loss[1]) and loss[2] == 12.5
    assert _col(run, "loss_avg")[0] == 834.728516
    assert _col(run, "lr") == [1e-05, 1e-05, 0.001]
    assert _col(run, "step_time_s") == [1.937414, 2.01117, 2.05]
    assert _col(run, "samples") == [11584, 11648, 11712]
    assert [e.step for e in run.events_of("nonfinite")] == [182]


KV = """\
---------------------------------
| eplenmean            | 200      |
| loss                 | 0.5      |
| misc/total_timesteps | 2048     |
---------------------------------
Found NaN, decreased lg_loss_scale to -16199.354
Found NaN, decreased lg_loss_scale to -16200.354
---------------------------------
| eplenmean            | 180      |
| loss                 | 0.4      |
| misc/total_timesteps | 4096     |
---------------------------------
"""


def test_kv_tables_are_one_record_each_and_the_lines_between_are_events(
    tmp_path, monkeypatch, capsys
):
    p = tmp_path / "log.txt"
    p.write_text(KV)
    assert parsers.sniff(p) == "kv-table"
    run = _one(p)
    assert _col(run, "step") == [2048, 4096]
    assert _col(run, "loss") == [0.5, 0.4]
    assert _col(run, "eplenmean") == [200.0, 180.0]
    assert [e.step for e in run.events_of("overflow_skip")] == [2049, 2050]
    code, out, _ = invoke(monkeypatch, capsys, "parse", str(p))
    assert code == 0
    assert "12 lines = 2 record + 2 event + 4 continuation + 4 ignored + 0 unrecognized" in out


def test_kv_table_step_in_three_digits_is_read_with_a_caveat(tmp_path):
    p = tmp_path / "log.txt"
    p.write_text(
        "-----------------------------\n| loss          | nan       |\n"
        "| step          | 1.53e+05  |\n-----------------------------\n"
    )
    run = _one(p)
    assert _col(run, "step") == [153000]
    assert math.isnan(_col(run, "loss")[0])
    assert any("3 significant digits" in c for c in run.meta.caveats)


def _mlflow_run(root: Path) -> Path:
    run = root / "1" / "ed05f9cd" / "metrics"
    (run / "train").mkdir(parents=True)
    (run / "loss").write_text(
        "1628697792090 3.2 0\n1628697793090 2.9 1\n1628697794090 2.5 2\n1628697795090 2.4 2\n"
    )
    (run / "learning_rate").write_text("1628697792090 0.001 0\n1628697794090 0.002 2\nnot one\n")
    (run / "train" / "acc").write_text("1628697792090 0.5 0\n")
    return run.parent


def test_an_mlflow_run_directory_is_a_record_a_step(tmp_path, monkeypatch, capsys):
    run_dir = _mlflow_run(tmp_path / "mlruns")
    for given in (run_dir, run_dir / "metrics", tmp_path / "mlruns"):
        assert parsers.sniff(given) == "mlflow"
        run = _one(given)
        assert _col(run, "step") == [0, 1, 2]
        assert _col(run, "loss") == [3.2, 2.9, 2.4]  # (step 2 logged twice: the last kept)
        assert _col(run, "lr") == [0.001, None, 0.002]
        assert _col(run, "train_acc") == [0.5, None, None]
        assert str(run.metrics.get_column("time")[0]) == "2021-08-11 16:03:12.090000+00:00"
    assert any("logged again" in c for c in run.meta.caveats)
    code, out, _ = invoke(monkeypatch, capsys, "parse", str(run_dir))
    assert code == 0
    assert "8 lines = 3 record + 0 event + 0 continuation + 4 ignored + 1 unrecognized" in out


def test_one_mlflow_metric_file_and_a_directory_of_several_runs(tmp_path, monkeypatch, capsys):
    run_dir = _mlflow_run(tmp_path / "mlruns")
    run = _one(run_dir / "metrics" / "loss")
    assert (_col(run, "step"), _col(run, "loss")) == ([0, 1, 2], [3.2, 2.9, 2.4])
    other = tmp_path / "mlruns" / "1" / "aa11" / "metrics"
    other.mkdir(parents=True)
    (other / "loss").write_text("1628697792090 1.0 0\n")
    with pytest.raises(InputError, match="holds 2 MLflow runs: give one run's directory"):
        parsers.read_logs(tmp_path / "mlruns")
    code, _, err = invoke(monkeypatch, capsys, "parse", str(tmp_path / "mlruns"))
    assert code == 2 and "holds 2 MLflow runs" in err


def test_sacred_metrics_json(tmp_path, monkeypatch, capsys):
    data = {
        "loss": {
            "steps": [0, 1, 2],
            "timestamps": ["2023-10-10T07:12:22.428417", "2023-10-10T07:12:22.444921", "x"],
            "values": [0.69, None, 0.57],
        },
        "learning_rate": {"steps": [0, 2], "timestamps": [], "values": [0.1, 0.05]},
        "note": "not a block",
    }
    p = tmp_path / "metrics.json"
    p.write_text(json.dumps(data, indent=2))
    assert parsers.sniff(p) == "sacred"
    run = _one(p)
    assert _col(run, "step") == [0, 1, 2]
    assert _col(run, "loss") == [0.69, None, 0.57]
    assert _col(run, "lr") == [0.1, None, 0.05]
    assert str(run.metrics.get_column("time")[1]) == "2023-10-10 07:12:22.444921+00:00"
    p.write_text('{"loss": {"steps": [0, 1], "timestamps": [], "values": [1, ')
    code, _, err = invoke(monkeypatch, capsys, "parse", str(p))
    assert code == 2 and "not a readable Sacred metrics.json" in err
