"""Generic metrics JSONL: fixtures against their expected runs, and each rule."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from _rows import file_rows, parse_accounted

import parsers
from logbook.run import Run, RunMeta
from parsers import jsonl

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "jsonl"
SOURCES = sorted(p for p in FIXTURES.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))


def parse_text(text: str, name: str = "x.jsonl"):
    return parse_accounted(jsonl, text, name)


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_fixture_gives_its_expected_run(src, tmp_path, monkeypatch):
    monkeypatch.chdir(src.parent)
    out = tmp_path / "out.jsonl"
    run = parsers.read_log(src.name)
    assert run.meta.format == "jsonl"
    run.write(out)
    expected = src.with_name(src.name.removesuffix(".jsonl") + ".expected.jsonl")
    assert file_rows(out) == file_rows(expected)
    parse_text(src.read_bytes().decode("utf-8-sig"))


def column(parsed, name: str) -> list:
    return parsed.metrics.get_column(name).to_list()


def test_aliases_in_priority_order():
    text = (
        '{"step": 1, "iteration": 99, "loss": 2.0, "train/loss": 9.0, "learning_rate": 1e-3}\n'
        '{"global_step": 2, "train_loss": 1.9, "optim/lr": 2e-3, "gnorm": 0.5, "scale": 8}\n'
        '{"_step": 3, "lm loss": 1.8, "train/lr": 3e-3, "optim/total_grad_norm": 0.4}\n'
        '{"iter": 4, "train/lm_loss": 1.7, "lr": 4e-3, "train/grad_norm": 0.3, "loss_scale": 4}\n'
        '{"num_updates": 5, "lm_loss": 1.6, "bsz": 7}\n'
    )
    p = parse_text(text)
    assert column(p, "step") == [1, 2, 3, 4, 5]
    assert column(p, "loss") == [2.0, 1.9, 1.8, 1.7, 1.6]
    assert column(p, "lr") == [1e-3, 2e-3, 3e-3, 4e-3, None]
    assert column(p, "grad_norm") == [None, 0.5, 0.4, 0.3, None]
    assert column(p, "loss_scale") == [None, 8.0, None, 4.0, None]
    assert column(p, "bsz") == [None, None, None, None, 7.0]
    assert "iteration" not in p.metrics.columns and "train_loss" not in p.metrics.columns


def test_nonfinite_tokens_bare_and_quoted():
    text = (
        '{"step": 1, "loss": NaN, "grad_norm": Infinity, "z": -Infinity}\n'
        '{"step": 2, "loss": "NaN", "grad_norm": "Infinity", "z": "-Infinity"}\n'
        '{"step": 3, "loss": 1.5, "grad_norm": [NaN, Infinity], "z": "x: NaN, y"}\n'
    )
    p = parse_text(text)
    loss, gn, z = column(p, "loss"), column(p, "grad_norm"), column(p, "z")
    assert math.isnan(loss[0]) and math.isnan(loss[1]) and loss[2] == 1.5
    assert gn == [math.inf, math.inf, None]
    assert z == [-math.inf, -math.inf, None]


def test_nested_keys_are_flattened_and_snake_cased():
    text = (
        '{"step": 1, "train": {"loss": 2.0, "z_loss": 0.1, "moe": {"aux": 0.01}}, '
        '"optim": {"lr": 0.1}, "tokensPerSec": 5, "train/z_loss": 0.2, "a.b c": 3}\n'
    )
    row = parse_text(text).metrics.row(0, named=True)
    assert (row["loss"], row["lr"], row["train_moe_aux"]) == (2.0, 0.1, 0.01)
    # "train": {"z_loss"} and "train/z_loss" are one name: the first key present wins
    assert (row["train_z_loss"], row["tokens_per_sec"], row["a_b_c"]) == (0.1, 5.0, 3.0)


def test_time_from_unix_seconds_milliseconds_and_iso():
    text = (
        '{"step": 1, "loss": 1, "time": 1700000000.5}\n'
        '{"step": 2, "loss": 1, "_timestamp": 1700000001250}\n'
        '{"step": 3, "loss": 1, "timestamp": "2023-11-14T22:13:22Z"}\n'
        '{"step": 4, "loss": 1, "time": "2023-11-14T23:13:23.5+01:00"}\n'
        '{"step": 5, "loss": 1, "time": "2023-11-14 22:13:24"}\n'
    )
    times = [str(t) for t in column(parse_text(text), "time")]
    assert times == [
        "2023-11-14 22:13:20.500000+00:00",
        "2023-11-14 22:13:21.250000+00:00",
        "2023-11-14 22:13:22+00:00",
        "2023-11-14 22:13:23.500000+00:00",
        "2023-11-14 22:13:24+00:00",
    ]


def test_a_time_that_is_no_clock_stays_a_metric():
    p = parse_text('{"step": 1, "loss": 1, "time": 0.35}\n{"step": 2, "loss": 1, "time": 0.4}\n')
    assert column(p, "time") == [None, None] and column(p, "time_value") == [0.35, 0.4]


def test_lines_that_are_not_objects_and_rows_that_are_no_records():
    text = (
        '{"run": "a", "config": {"lr": 0.1}}\n'  # metadata: no step in a stepped file
        "\n# comment\n// comment\n"
        "plain text\n"
        "[1, 2]\n"
        '{"step": 1, "loss": 2.0\n'
        '{"step": 1, "loss": 2.0}\n'
        '{"step": 1, "eval/loss": 2.2, "eval/acc": 0.5}\n'
        '{"step": 2, "note": "text only"}\n'
    )
    p = parse_text(text)
    assert column(p, "step") == [1] and column(p, "line") == [8]
    assert p.unrecognized.to_list() == [5, 6, 7]
    assert p.ignored == 5  # blank, two comments, the config row, the text-only row
    (valid,) = p.events
    assert (valid.kind, valid.step, valid.split, valid.source.line) == ("validation", 1, "eval", 9)
    assert valid.values == {"loss": 2.2, "acc": 0.5}


def test_crlf_and_byte_order_mark(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"step": 1, "loss": 2.0}\r\n{"step": 2, "loss": 1.0}\r\n')
    assert parsers.sniff(path) == "jsonl"
    run = parsers.read_log(path)
    assert run.metrics.get_column("loss").to_list() == [2.0, 1.0]
    assert run.meta.parse[0].crlf and run.meta.parse[0].unrecognized == 0


def test_logbook_files_are_left_to_the_logbook_format(tmp_path):
    path = tmp_path / "run.jsonl"
    Run(meta=RunMeta(name="r")).write(path)
    head = path.read_text().splitlines()
    assert jsonl.sniff(head) == 0
    assert parsers.sniff(path) == "logbook"


@pytest.mark.parametrize(
    ("head", "score"),
    [
        (['{"step": 1, "loss": 2.5}', '{"step": 2, "loss": 2.4}'], 80),
        (['{"train": {"loss": 2.5}}'], 80),
        (['{"a": 1}', '{"a": 2}'], 60),
        (['{"epoch": 1, "loss": "9.1", "num_updates": "10"}'], 60),
        (["# header", '{"step": 1, "loss": 2.5}', "truncated {"], 80),
        (['2022-01-01 00:00:00 | INFO | train_inner | {"epoch": 1}'], 0),
        ([" iteration      100/  1000 | lm loss: 3.1 |"], 0),
        (["x", "y", '{"step": 1}'], 0),
    ],
)
def test_sniff(head, score):
    assert jsonl.sniff(head) == score


def test_bare_fairseq_json_goes_to_metaseq(tmp_path):
    path = tmp_path / "train.log"
    path.write_text('{"epoch": 1, "update": 0.1, "loss": "9.1", "num_updates": "10"}\n')
    assert parsers.sniff(path) == "metaseq"


def test_steps_beyond_2_to_the_53_stay_exact(tmp_path):
    log = tmp_path / "big.jsonl"
    log.write_text(
        '{"step": 9007199254740993, "loss": 2.5}\n{"step": 9007199254740995, "loss": 2.4}\n'
        '{"step": 9223372036854775807, "loss": 2.3}\n{"step": 99999999999999999999999, "loss": 2}\n'
    )
    run = parsers.read_log(str(log))
    assert run.metrics.get_column("step").to_list() == [
        9007199254740993,
        9007199254740995,
        9223372036854775807,
    ]
    st = run.meta.parse[0]
    assert (st.record_lines, st.ignored, st.lines) == (3, 1, 4)  # beyond int64: no step


def test_an_evaluators_rows_beside_training_rows_are_validation_events():
    # mmengine's vis_data/scalars.json: the val rows carry the epoch as their step
    text = (
        '{"lr": 0.02, "data_time": 0.0038, "loss": 1.7152, "time": 0.1432, "epoch": 1, '
        '"iter": 69, "memory": 3060, "step": 69}\n'
        '{"accuracy/top1": 43.13, "data_time": 0.0914, "time": 0.1214, "step": 1}\n'
        '{"lr": 0.02, "data_time": 0.0238, "loss": 0.9905, "time": 0.1217, "epoch": 2, '
        '"iter": 138, "memory": 3060, "step": 138}\n'
        '{"accuracy/top1": 70.96, "data_time": 0.0715, "time": 0.0999, "step": 2}\n'
    )
    parsed = parse_text(text)
    assert parsed.metrics.get_column("step").to_list() == [69, 138]
    assert [e.kind for e in parsed.events] == ["validation", "validation"]


def test_a_null_loss_is_a_nonfinite_event_where_the_file_logs_a_loss():
    text = (
        '{"step": 1, "loss": 2.0, "loss_scale": 4.0}\n'
        '{"step": 2, "loss": null, "loss_scale": 1.0}\n'
        '{"step": 3, "train": {"loss": null}, "grad_norm": null, "lr": 0.1}\n'
        '{"step": 4, "lr": 0.1}\n'  # a loss not logged on this row: nothing to say
        '{"step": 5, "loss": 1.9, "grad_norm": 0.5}\n'
    )
    p = jsonl.parse(pl.DataFrame({"line": range(1, 6), "text": text.splitlines()}), "x.jsonl")
    got = [(e.step, e.metric, e.value, e.source.line) for e in p.events if e.kind == "nonfinite"]
    # (on the record's own line: the line stays counted as the record's)
    assert got == [(2, "loss", "null", 2), (3, "loss", "null", 3), (3, "grad_norm", "null", 3)]
    assert p.unrecognized.len() == 0 and p.metrics.height == 5


def test_nulls_of_a_metric_never_logged_say_nothing():
    p = parse_text('{"step": 1, "loss": 2.0, "act_norm": null}\n{"step": 2, "loss": 1.9}\n')
    assert [e for e in p.events if e.kind == "nonfinite"] == []


def test_a_run_of_null_losses_is_found_as_nonfinite(tmp_path):
    from logbook.detectors import detect

    rows = [
        f'{{"step": {i}, "loss": {3 - i / 100:.3f}, "loss_scale": 65536}}' for i in range(1, 60)
    ]
    rows += [f'{{"step": {i}, "loss": null, "loss_scale": 1}}' for i in range(60, 70)]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(rows) + "\n")
    (f,) = [f for f in detect(parsers.read_log(path)) if f.kind == "nonfinite"]
    assert (f.severity, f.start_step, f.end_step) == ("critical", 60, 69)


def test_namespaced_keys_reach_the_detector_columns():
    text = (
        '{"step": 1, "train/act_norm": 3.0, "model/attention_logit_max": 9.0, "train/logz": 1.5,'
        ' "stats/param_norm": 40.0, "total_loss": 2.5, "val/act_norm": 2.0}\n'
        '{"step": 2, "train/act_norm": 3.1, "model/attention_logit_max": 9.5, "train/logz": 1.4,'
        ' "stats/param_norm": 40.1, "total_loss": 2.4, "val/act_norm": 2.0}\n'
    )
    p = parse_text(text)
    assert column(p, "act_norm") == [3.0, 3.1]
    assert column(p, "attn_logit_max") == [9.0, 9.5]
    assert column(p, "logz") == [1.5, 1.4]
    assert column(p, "param_norm") == [40.0, 40.1]
    assert column(p, "loss") == [2.5, 2.4]
    assert column(p, "val_act_norm") == [2.0, 2.0]  # an evaluation key keeps its name


def test_an_explicit_alias_wins_over_a_namespaced_one():
    p = parse_text('{"step": 1, "loss": 2.0, "total_loss": 5.0}\n')
    assert column(p, "loss") == [2.0] and column(p, "total_loss") == [5.0]


def test_tensorboard_tags_of_detector_metrics_in_other_namespaces():
    from parsers.tags import columns

    got = columns(["train/loss", "model/act_norm", "stats/attn_logit_max", "layer_norm"])
    assert got == {
        "train/loss": "loss",
        "model/act_norm": "act_norm",
        "stats/attn_logit_max": "attn_logit_max",
        "layer_norm": "layer_norm",  # not a norm the detectors watch
    }


def test_a_log_of_one_line_per_epoch_counts_its_records_by_epoch():
    # MAE's and DeiT's ``log.txt``: ``{"train_lr": ..., "train_loss": ..., "epoch": 0}``
    text = "".join(
        f'{{"train_lr": 7.8e-0{7 - e}, "train_loss": {2.07 - e / 10:.2f}, "epoch": {e}}}\n'
        for e in range(3)
    )
    parsed = parse_text(text)
    assert column(parsed, "step") == [0, 1, 2]
    assert column(parsed, "loss") == [2.07, 1.97, 1.87]
    assert parsed.meta["caveats"] == [
        "no step in the file: the epoch is the step (a record per epoch)"
    ]


def test_rows_of_progress_only_are_no_records():
    # LLaMA-Factory's trainer_log.jsonl of a prediction job: steps, percentage, times
    text = "".join(
        f'{{"current_steps": {s}, "total_steps": 250, "percentage": {s / 2.5:.1f}, '
        f'"elapsed_time": "0:00:{s // 5:02d}", "remaining_time": "0:01:00"}}\n'
        for s in (5, 10, 15)
    )
    parsed = parse_text(text)
    assert parsed.metrics.height == 0
    assert parsed.ignored == 3
