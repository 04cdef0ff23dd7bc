"""fairseq's simple format: fixtures against their expected runs, and each rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from _rows import file_rows, parse_accounted

import parsers
from parsers import fairseq_simple

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "fairseq-simple"
CORPUS = ROOT / ".." / "shared" / "corpus"
LN2 = math.log(2)


def parse_text(text: str, name: str = "x.log"):
    return parse_accounted(fairseq_simple, text, name)


@pytest.mark.parametrize("log", sorted(FIXTURES.glob("*.log")), ids=lambda p: p.name)
def test_fixture_gives_its_expected_run(log, tmp_path, monkeypatch):
    monkeypatch.chdir(log.parent)
    out = tmp_path / "out.jsonl"
    run = parsers.read_log(log.name)
    assert run.meta.format == "fairseq-simple"
    run.write(out)
    assert file_rows(out) == file_rows(log.with_suffix(".expected.jsonl"))
    parse_text(log.read_bytes().decode())


RECORD = (
    "2020-07-17 04:08:14 | INFO | train_inner | epoch 001:    100 / 2952087 loss=16.348, "
    "nll_loss=16.1, ppl=83437.5, wps=8640.2, ups=4.66, wpb=1854, bsz=2, num_updates=100, "
    "lr=1e-06, gnorm=4.215, loss_scale=128, train_wall=22, wall=120\n"
)


def test_record_values():
    row = parse_text(RECORD).metrics.row(0, named=True)
    assert (row["step"], row["line"], str(row["time"])) == (100, 1, "2020-07-17 04:08:14+00:00")
    assert (row["loss"], row["nll_loss"]) == (16.348 * LN2, 16.1 * LN2)
    assert (row["ppl"], row["wps"], row["ups"], row["wpb"]) == (83437.5, 8640.2, 4.66, 1854.0)
    assert (row["batch_size"], row["lr"], row["grad_norm"]) == (2, 1e-06, 4.215)
    assert (row["loss_scale"], row["train_wall"], row["wall"]) == (128.0, 22.0, 120.0)


def test_step_is_num_updates_not_the_epoch_counter():
    text = (
        "| epoch 001:    500 / 500 loss=3.0, num_updates=250, lr=1e-4\n"
        "| epoch 002:    100 / 500 loss=2.9, num_updates=300, lr=1e-4\n"
        "| epoch 002:    200 / 500 loss=2.8, num_up\n"
        "| epoch 002:    300 / 500 loss=2.7, num_updates=400, lr=1e-4, wall=\n"
    )
    parsed = parse_text(text)
    assert parsed.metrics.get_column("step").to_list() == [250, 300, 400]
    assert "wall" not in parsed.metrics.columns  # never a value: not a metric column
    assert parsed.unrecognized.to_list() == [3]  # cut before its num_updates: no step


def test_counter_stands_in_without_num_updates():
    text = "epoch 001:     10 / 50 loss=3.0, lr=1e-4\nepoch 001:     20 / 50 loss=2.9\n"
    assert parse_text(text).metrics.get_column("step").to_list() == [10, 20]


def test_validation_and_summary_lines():
    text = (
        RECORD
        + "2020-07-17 05:00:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.634"
        " | nll_loss 9.1 | ppl 794.4 | wps 2000 | num_updates 100 | best_loss 9.634\n"
        + "2020-07-17 05:00:01 | INFO | train | epoch 001 | loss 10.2 | num_updates 100\n"
        + "| epoch 001 | valid on 'test' subset | loss 9.7 | num_updates 100\n"
    )
    parsed = parse_text(text)
    valid, test = parsed.events
    assert (valid.step, valid.split, valid.source.line) == (100, "valid", 2)
    assert valid.values == {
        "loss": 9.634 * LN2,
        "nll_loss": 9.1 * LN2,
        "ppl": 794.4,
        "wps": 2000.0,
        "best_loss": 9.634,
    }
    assert str(valid.time) == "2020-07-17 05:00:00+00:00"
    assert (test.split, test.values, test.time) == ("test", {"loss": 9.7 * LN2}, None)
    assert parsed.ignored == 1


def test_events_shared_with_the_json_format():
    text = (
        "| loaded checkpoint checkpoints/checkpoint_last.pt (epoch 3 @ 5000 updates)\n"
        "| epoch 003:    100 / 500 loss=3.0, num_updates=5100, loss_scale=128\n"
        "| WARNING: overflow detected, setting loss scale to: 64.0\n"
        "| epoch 003:    200 / 500 loss=2.9, num_updates=5199, loss_scale=64\n"
        "| saved checkpoint checkpoints/checkpoint3.pt (epoch 3 @ 5199 updates) "
        "(writing took 2.5 seconds)\n"
    )
    parsed = parse_text(text)
    kinds = [(e.kind, e.step, e.source.line) for e in parsed.events]
    assert kinds == [
        ("restart", None, 1),
        ("overflow_skip", 5199, 3),
        ("loss_scale_change", 5199, 3),
        ("checkpoint_save", 5199, 5),
    ]
    assert parsed.events[0].resume_step == 5000
    assert (parsed.events[2].old, parsed.events[2].new) == (128.0, 64.0)


@pytest.mark.parametrize(
    ("head", "score"),
    [
        (["2020-07-17 04:08:14 | INFO | train_inner | epoch 001:    100 / 29 loss=1.2"], 90),
        (["| epoch 001:    100 / 1102 loss=12.412, nll_loss=12.047"], 90),
        (["| epoch 001 | valid on 'valid' subset | loss 9.011 | num_updates 1102"], 60),
        (["2020-11-20 10:00:00 | INFO | fairseq_cli.train | task: TranslationTask"], 30),
        (['2022-01-01 00:00:00 | INFO | train_inner | {"epoch": 1, "loss": "3"}'], 0),
        ([" iteration      100/  1000 | consumed samples: 100 | lm loss: 3.1 |"], 0),
        (['{"step": 1, "loss": 2.5}'], 0),
    ],
)
def test_sniff(head, score):
    assert fairseq_simple.sniff(head) == score


@pytest.mark.skipif(not (CORPUS / "labels.json").exists(), reason="corpus not present")
def test_corpus_file_matches_its_label():
    name = "fairseq_issue_2332_simple_format_train_inner.txt"
    label = next(x for x in json.loads((CORPUS / "labels.json").read_text()) if x["file"] == name)
    run = parsers.read_log(CORPUS / "logs" / name)
    steps = run.metrics.get_column("step").to_list()
    assert (len(steps), steps[0], steps[-1]) == (
        label["progress_records"],
        label["first_step"],
        label["last_step"],
    )
    assert run.meta.format == "fairseq-simple" and run.meta.parse[0].unrecognized == 0


def test_a_loss_in_nats_is_flagged_by_its_perplexity():
    nats = "| epoch 001:  10 / 50 loss=2.0, ppl=7.39, num_updates=10\n"
    bits = "| epoch 001:  10 / 50 loss=2.0, ppl=4, num_updates=10\n"
    caveat = "ppl = e**loss in this log: its loss looks like nats, yet was read as bits"
    assert parse_text(nats).meta["caveats"] == [caveat]
    assert "caveats" not in parse_text(bits).meta
    assert parse_text(nats).metrics.get_column("loss").to_list() == [2.0 * LN2]


OVERFLOWED = (
    "2020-10-01 10:59:29 | INFO | train_inner | epoch 001:      2 / 78 loss_scale=32, "
    "train_wall=0, wall=6\n"
    "2020-10-01 10:59:29 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss "
    "scale to: 16.0\n"
    "2020-10-01 10:59:29 | INFO | train_inner | epoch 001:      3 / 78 loss_scale=16, "
    "train_wall=0, wall=6\n"
    "2020-10-01 10:59:29 | INFO | train_inner | epoch 001:      4 / 78 loss=1.006, ppl=2.01, "
    "num_updates=1, lr=2.24975e-07, gnorm=0.056, loss_scale=16, train_wall=0, wall=6\n"
    "2020-10-01 10:59:29 | INFO | train_inner | epoch 001:      5 / 78 loss=0.97, ppl=1.96,\n"
)


def test_overflowed_updates_records_number_the_file_by_update_attempt():
    parsed = parse_text(OVERFLOWED)
    m = parsed.metrics
    assert m.get_column("step").to_list() == [2, 3, 4, 5]
    assert m.get_column("line").to_list() == [1, 3, 4, 5]
    assert m.get_column("num_updates").to_list() == [None, None, 1, None]
    assert m.get_column("skipped").to_list() == [1, 1, 0, 0]
    assert m.get_column("loss_scale").to_list() == [32.0, 16.0, 16.0, None]
    assert m.get_column("loss").to_list() == [None, None, 1.006 * LN2, 0.97 * LN2]
    assert parsed.meta["caveats"] == [
        "2 records of overflowed updates print no num_updates: every record's step is its "
        "update attempt, (epoch - 1) * 78 + the in-epoch position, not num_updates (kept as "
        "a column)"
    ]
    overflow = [(e.kind, e.step, e.source.line) for e in parsed.events]
    assert overflow == [("overflow_skip", 3, 2), ("loss_scale_change", 3, 2)]
    assert parsed.unrecognized.to_list() == []


def test_update_attempts_run_on_across_epochs():
    text = (
        "| epoch 001:    100 / 120 loss=3.0, num_updates=99, loss_scale=8\n"
        "| epoch 001:    101 / 120 loss_scale=4, train_wall=1, wall=9\n"
        "| epoch 002:     10 / 120 loss=2.9, num_updates=128, loss_scale=4\n"
    )
    parsed = parse_text(text)
    assert parsed.metrics.get_column("step").to_list() == [100, 101, 130]
    assert parsed.metrics.get_column("num_updates").to_list() == [99, None, 128]
    assert "(epoch - 1) * 120 + the in-epoch position" in parsed.meta["caveats"][0]


def test_a_cut_record_without_num_updates_is_no_overflowed_update():
    text = (
        "| epoch 001:    100 / 500 loss=3.0, num_updates=100, loss_scale=8\n"
        "| epoch 001:    200 / 500 loss=, loss_scale=8\n"
    )
    parsed = parse_text(text)
    assert parsed.metrics.get_column("step").to_list() == [100]
    assert parsed.unrecognized.to_list() == [2] and "caveats" not in parsed.meta


def test_an_epoch_summary_beside_train_inner_records_is_no_record():
    text = (
        "2020-03-23 11:38:13 | INFO | train | epoch 002 | loss 9.803 | nll_loss 8.89 | "
        "ppl 474.37 | num_updates 695 | lr 0.00017375 | gnorm 55.005 | loss_scale 0 | "
        "train_wall 4512 | wall 9786\n"
        "2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, "
        "nll_loss=8.44, ppl=347.28, num_updates=700, lr=0.000175, gnorm=156.036, loss_scale=0, "
        "train_wall=1281, wall=9877\n"
    )
    parsed = parse_text(text)
    row = parsed.metrics.row(0, named=True)
    assert parsed.metrics.height == 1 and parsed.ignored == 1
    got = (row["step"], row["line"], row["loss"], row["grad_norm"])
    assert got == (700, 2, 9.44 * LN2, 156.036)
    assert "caveats" not in parsed.meta
