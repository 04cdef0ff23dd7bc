"""metaseq/fairseq JSON logs: fixtures against their expected runs, and each rule."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import polars as pl
import pytest
from _rows import assert_lines_accounted, file_rows

import parsers
from logbook.textio import split_lines
from parsers import metaseq

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "metaseq"
CORPUS = ROOT / ".." / "shared" / "corpus"
LN2 = math.log(2)


def parse_text(text: str, name: str = "x.log"):
    lines, _ = split_lines(text.encode())
    return metaseq.parse(lines, name), lines.height


@pytest.mark.parametrize("log", sorted(FIXTURES.glob("*.log")), ids=lambda p: p.name)
def test_fixture_gives_its_expected_run(log, tmp_path, monkeypatch):
    monkeypatch.chdir(log.parent)
    out = tmp_path / "out.jsonl"
    parsers.read_log(log.name, "metaseq").write(out)
    assert file_rows(out) == file_rows(log.with_suffix(".expected.jsonl"))
    lines = log.read_bytes().count(b"\n")
    parsed, n = parse_text(log.read_text(), log.name)
    assert n == lines
    assert_lines_accounted(parsed, n)


def test_every_fixture_is_sniffed_as_metaseq():
    for log in FIXTURES.glob("*.log"):
        assert parsers.sniff(log) == "metaseq", log.name


def test_record_values_strings_prefix_and_bits_to_nats():
    text = (
        'slurm_procid 0 : 2022-11-11 16:04:15 | INFO | train_inner | {"epoch": 1, '
        '"actv_norm": "0.447", "loss": "12.291", "ppl": "5012.42", "wpb": "1.04858e+06", '
        '"bsz": "512", "num_updates": "85", "lr": "4.45726e-06", "gnorm": "4.617", '
        '"loss_scale": "8", "gnorm_layer3": "0.00221", "cuda_gb_free": "56.9", "wall": "358"}\n'
    )
    parsed, _ = parse_text(text)
    row = parsed.metrics.row(0, named=True)
    assert row["step"] == 85 and row["line"] == 1
    assert str(row["time"]) == "2022-11-11 16:04:15+00:00"
    assert row["loss"] == 12.291 * LN2
    assert row["ppl"] == 5012.42  # perplexity does not depend on the log base
    assert (row["lr"], row["grad_norm"], row["loss_scale"]) == (4.45726e-06, 4.617, 8.0)
    assert (row["act_norm"], row["batch_size"], row["wpb"]) == (0.447, 512, 1048580.0)
    assert (row["gnorm_layer3"], row["cuda_gb_free"], row["wall"]) == (0.00221, 56.9, 358.0)
    assert parsed.meta["units"] == {"loss": "bits -> nats (x ln 2)"}


def test_truncated_and_corrupted_payloads_are_unrecognized():
    ok = '2022-11-11 16:04:15 | INFO | train_inner | {"loss": "12.2", "num_updates": "%d"}\n'
    text = (
        ok % 1
        + '2022-11-11 16:04:16 | INFO | train_inner | {"epoch": 1, "docsperex": "2.69", "\n'
        + '2022-11-11 16:04:17 | INFO | train_inner | {"loss": "1\x00\xff2", "num_upd}\n'
        + ok % 2
    )
    parsed, n = parse_text(text)
    assert parsed.metrics.get_column("step").to_list() == [1, 2]
    assert parsed.unrecognized.to_list() == [2, 3]
    assert_lines_accounted(parsed, n)


def _events(text: str):
    parsed, n = parse_text(text)
    assert_lines_accounted(parsed, n)
    return parsed, [(e.kind, e.step, e.source.line) for e in parsed.events]


REC = '2022-11-11 14:00:%02d | INFO | train_inner | {"loss": "9", "num_updates": "%d"%s}\n'
NOTE = "2022-11-11 14:00:%02d | INFO | metaseq.trainer | NOTE: gradient overflow detected, "


def test_overflow_notes_take_the_next_records_step_and_track_the_scale():
    text = (
        "2022-11-11 14:00:00 | INFO | metaseq.optim.dynamic_loss_scaler | *** SCALE_WINDOW: "
        "256, loss scale: 4 ***\n"
        + REC % (1, 10, "")
        + NOTE % 2
        + "ignoring gradient, setting loss scale to: 2.0\n"
        + NOTE % 3
        + "ignoring gradient, setting loss scale to: 2.0\n"
        + REC % (4, 20, ', "loss_scale": "2"')
        + NOTE % 5
        + "ignoring gradient, Grad norm: 53.21 exceeds threshold: 1.00, rejecting batch.\n"
        + REC % (6, 30, ', "loss_scale": "2"')
    )
    parsed, got = _events(text)
    assert got == [
        ("overflow_skip", 20, 3),
        ("loss_scale_change", 20, 3),
        ("overflow_skip", 20, 4),  # the scale did not change: no change event
        ("data_skip", 30, 6),  # a rejected batch is no fp16 overflow
    ]
    first, change, second, rejected = parsed.events
    assert (first.attempted_scale, first.new_scale) == (4.0, 2.0)
    assert (change.old, change.new, change.step_source) == (4.0, 2.0, "record")
    assert (second.attempted_scale, second.new_scale) == (2.0, 2.0)
    assert rejected.start_step is None and "Grad norm: 53.21" in rejected.text
    assert parsed.ignored == 1  # the banner


def test_scaling_lr_skipping_batches_and_checkpoint_lines():
    text = (
        REC % (1, 10, "")
        + "2022-11-11 14:00:02 | INFO | metaseq.trainer | Scaling LR by 0.52 to 0.000052\n"
        + "2022-11-11 14:00:02 | INFO | metaseq.trainer | Scaling LR by 0.10 to 0.000000\n"
        + "2022-11-11 14:00:03 | INFO | metaseq_cli.train | Skipping batches starting from step"
        " 11 with 1 batches left to skip\n"
        + REC
        % (4, 20, "")
        + "2022-11-11 14:00:05 | INFO | metaseq.checkpoint_utils | Saved checkpoint "
        "/ckpt/checkpoint_20.pt (epoch 1 @ 20 updates) (writing took 3.91 seconds)\n"
    )
    parsed, got = _events(text)
    assert got == [
        ("lr_change", 20, 2),
        ("lr_change", 20, 3),
        ("data_skip", 11, 4),
        ("checkpoint_save", 20, 6),
    ]
    scaled, tiny, skip, save = parsed.events
    assert (scaled.new, scaled.old, scaled.manual) == (0.000052, None, True)
    assert tiny.new is None  # printed as 0.000000: the value is lost
    assert (skip.start_step, skip.end_step) == (11, 11)
    assert (save.path, save.save_time_s) == ("/ckpt/checkpoint_20.pt", 3.91)


def test_restart_marker_and_one_crash_event_per_crash():
    text = (
        "2022-11-11 14:00:00 | INFO | metaseq.trainer | No existing checkpoint found /c.pt\n"
        + REC % (1, 10, "")
        + REC % (2, 20, "")
        + "Traceback (most recent call last):\n"
        + '  File "train.py", line 5, in <module>\n'
        + "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
        + "srun: error: node-7: task 3: Exited with exit code 1\n"
        + "2022-11-11 15:00:00 | INFO | metaseq.trainer | Loaded checkpoint /c.pt "
        "(epoch 1 @ 10 updates)\n" + REC % (3, 20, "")
    )
    parsed, got = _events(text)
    assert got == [("restart", None, 1), ("hardware_failure", None, 6), ("restart", None, 8)]
    fresh, crash, loaded = parsed.events
    assert (fresh.resume_step, loaded.resume_step) == (0, 10)
    assert (crash.cause, crash.node) == ("ecc", "node-7")
    assert parsed.ignored == 3  # the traceback header, its frame, and the srun line
    run = _stitched(text)
    restarts = run.events_of("restart")
    assert [(r.resume_step, r.last_step_before, r.lost_steps, r.cause) for r in restarts] == [
        (10, 20, 10, "ecc")
    ]
    assert run.metrics.get_column("segment").to_list() == [0, 0, 1]


def _stitched(text: str):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "run.log"
        p.write_text(text)
        return parsers.read_log(p, "metaseq")


def test_validation_records_and_the_epoch_summary():
    text = (
        REC
        % (1, 10, "")
        + '2022-11-11 14:00:02 | INFO | valid | {"epoch": 1, "valid_loss": "8.5", '
        '"valid_ppl": "362.04", "valid_num_updates": "10", "valid_best_loss": "8.5"}\n'
        + '2022-11-11 14:00:03 | INFO | valid_on_BookCorpus | {"epoch": 1, '
        '"valid_on_BookCorpus_loss": "9", "valid_on_BookCorpus_num_updates": "10"}\n'
        + '2022-11-11 14:00:04 | INFO | train | {"epoch": 1, "train_loss": "9.1", '
        '"train_num_updates": "10"}\n'
    )
    parsed, got = _events(text)
    assert got == [("validation", 10, 2), ("validation", 10, 3)]
    valid, book = parsed.events
    assert valid.split == "valid"
    assert valid.values == {"loss": 8.5 * LN2, "ppl": 362.04, "best_loss": 8.5}
    assert (book.split, book.values) == ("valid_on_BookCorpus", {"loss": 9 * LN2})
    assert parsed.ignored == 1 and parsed.metrics.height == 1


def test_a_record_printed_twice_in_a_row_counts_once():
    text = REC % (1, 10, "") + REC % (1, 10, "") + REC % (2, 20, "") + REC % (3, 10, "")
    parsed, n = parse_text(text)
    assert parsed.metrics.get_column("line").to_list() == [1, 3, 4]
    assert parsed.ignored == 1
    assert_lines_accounted(parsed, n)


def test_noise_continuations_and_unknown_lines():
    text = (
        "2022-11-11 14:00:00 | INFO | metaseq_cli.train | TransformerLanguageModel(\n"
        "  (decoder): TransformerDecoder(\n"
        ")\n"
        "node-1:5:5 [0] NCCL INFO Channel 00/32 :    0   1\n"
        + REC % (1, 10, "")
        + "  an indented line after a record\n"
        + "something else entirely\n"
    )
    parsed, n = parse_text(text)
    assert parsed.ignored == 4 and parsed.unrecognized.to_list() == [6, 7]
    assert_lines_accounted(parsed, n)


def test_launcher_prefixes_on_tracebacks_and_printouts():
    pre = "slurm_procid 0 : "
    text = (
        pre
        + REC % (1, 10, "")
        + pre
        + "Traceback (most recent call last):\n"
        + pre
        + '  File "x.py", line 3, in <module>\n'
        + pre
        + "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n"
        + "[default0]: TransformerLanguageModel(\n"
        + "[default0]:   (decoder): TransformerDecoder()\n"
        + "[default0]: )\n"
    )
    parsed, _ = _events(text)
    (crash,) = parsed.events
    assert (crash.cause, crash.source.line) == ("oom", 4)
    assert parsed.ignored == 5 and parsed.unrecognized.len() == 0


def test_wrapped_and_glued_records_are_mended():
    fixture = (FIXTURES / "wrapped_glued.log").read_text()
    parsed, _ = parse_text(fixture)
    m = parsed.metrics
    assert m.get_column("step").to_list() == [1, 2, 3, 4, 7]
    assert m.get_column("line").to_list() == [2, 3, 6, 6, 9]
    assert m.get_column("grad_norm").to_list()[:2] == [16.981, 16.5]
    assert [str(t) for t in m.get_column("time").to_list()[2:4]] == [
        "2022-11-11 14:00:12+00:00",
        "2022-11-11 14:00:13+00:00",
    ]
    assert parsed.meta["continued_lines"] == 2
    assert parsed.unrecognized.to_list() == [7, 8]


def test_polars_and_python_paths_agree():
    """A payload only Python's json can read (a number polars refuses) is read the same."""
    text = REC % (1, 10, ', "big": 1e400, "x": "7"') + REC % (2, 20, ', "x": "8"')
    parsed, _ = parse_text(text)
    m = parsed.metrics
    assert m.get_column("step").to_list() == [10, 20]
    assert m.get_column("x").to_list() == [7.0, 8.0]
    assert m.get_column("big").to_list() == [math.inf, None]


@pytest.mark.parametrize(
    ("head", "score"),
    [
        (['2022-01-01 00:00:00 | INFO | train_inner | {"epoch": 1, "loss": "3"}'], 90),
        (['{"epoch": 1, "update": 0.5, "loss": "9.1", "num_updates": "10"}'], 70),
        (["2022-01-01 00:00:00 | INFO | metaseq.trainer | begin training epoch 1"], 40),
        (["2022-01-01 00:00:00 | INFO | fairseq.trainer | begin training epoch 1"], 25),
        ([" iteration      100/  1000 | lm loss: 3.1 |"], 0),
        (['{"step": 1, "loss": 2.5}'], 0),
        (["2020-01-01 00:00:00 | INFO | train_inner | epoch 001:  10 / 100 loss=3.1"], 0),
    ],
)
def test_sniff(head, score):
    assert metaseq.sniff(head) == score


def test_empty_input_gives_empty_metrics():
    parsed, n = parse_text("\n# note: nothing here\n")
    assert parsed.metrics.height == 0 and parsed.ignored == 2 and n == 2
    assert isinstance(parsed.metrics, pl.DataFrame)


LABELLED = [
    "metaseq_pr_309_train_inner_actv_norm.txt",
    "metaseq_pr_314_loss_scaler_startup_oom.txt",
    "metaseq_pr_507_slurm_procid_missing_lines.txt",
    "metaseq_pr_509_train_inner_corruption.txt",
    "metaseq_pr_67_train_inner_per_layer_gnorm.txt",
]


@pytest.mark.skipif(not (CORPUS / "labels.json").exists(), reason="corpus not present")
@pytest.mark.parametrize("name", LABELLED)
def test_corpus_files_match_their_labels(name):
    label = next(x for x in json.loads((CORPUS / "labels.json").read_text()) if x["file"] == name)
    path = CORPUS / "logs" / name
    assert parsers.sniff(path) == "metaseq"
    run = parsers.read_log(path)
    steps = run.metrics.get_column("step").to_list()
    assert len(steps) == label["progress_records"]
    assert (steps[:1] or [None])[0] == label["first_step"]
    assert (steps[-1:] or [None])[0] == label["last_step"]
    assert run.meta.parse[0].first_unrecognized == label["unreadable_lines"]


HYDRA = "[2022-04-08 18:%02d:05,372][%s][INFO] - %s\n"


def test_the_hydra_layout_of_fairseq_train():
    text = (
        HYDRA % (41, "fairseq.trainer", "begin training epoch 1")
        + HYDRA % (48, "train_inner", '{"epoch": 1, "loss": "9.276", "num_updates": "200"}')
        + HYDRA
        % (
            55,
            "fairseq.trainer",
            "NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0",
        )
        + HYDRA % (56, "train_inner", '{"epoch": 1, "loss": "6.961", "num_updates": "400"}')
        + HYDRA % (58, "valid", '{"epoch": 1, "valid_loss": "6.389", "valid_num_updates": "479"}')
        + HYDRA % (59, "train", '{"epoch": 1, "train_loss": "7.864", "train_num_updates": "479"}')
    )
    parsed, evs = _events(text)
    assert parsed.metrics.get_column("step").to_list() == [200, 400]
    assert parsed.metrics.get_column("loss").round(4).to_list() == [
        round(9.276 * math.log(2), 4),
        round(6.961 * math.log(2), 4),
    ]
    assert ("overflow_skip", 400, 3) in evs and ("validation", 479, 5) in evs
    assert parsed.unrecognized.len() == 0
