"""Hugging Face Trainer: trainer_state.json files written by transformers' Trainer
(fixtures/hf_trainer/make_fixtures.py), one file and a rewound output directory."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from _rows import normalized, written_rows

import parsers
from logbook.errors import InputError
from logbook.run import Run
from logbook.segments import order_parts, stitch
from logbook.textio import read_lines, split_lines
from parsers import hf_trainer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_trainer"
CASES = ["trainer_state.json", "rewind"]


def run_of(path: Path) -> Run:
    if path.is_dir():
        parts = order_parts(hf_trainer.read_path(path))
    else:
        parts = [hf_trainer.parse(read_lines(path)[0], str(path))]
    metrics, events = stitch(parts, [p.meta["file"] for p in parts])
    return Run(metrics=metrics, events=events)


@pytest.mark.parametrize("case", CASES)
def test_fixture_gives_its_expected_rows(case, tmp_path, monkeypatch):
    monkeypatch.chdir(FIXTURES)
    got = written_rows(run_of(Path(case)), tmp_path)
    stem = case.rsplit(".", 1)[0] if case.endswith(".json") else case
    expected = (FIXTURES / f"{stem}.expected.jsonl").read_text().splitlines()
    assert got == normalized(expected)


def test_one_file_rows_events_summary_and_flags():
    path = FIXTURES / "trainer_state.json"
    lines, _ = read_lines(path)
    p = hf_trainer.parse(lines, "trainer_state.json")
    m = p.metrics
    assert m.get_column("step").to_list() == [2, 4, 6, 8, 10, 12]
    assert m.get_column("tokens").to_list() == [128, 256, 384, 512, 640, 768]
    assert m.get_column("loss").to_list()[:2] == [3.9068238735198975, 3.8901596069335938]
    assert m.get_column("lr").to_list()[:2] == [0.0009166666666666666, 0.00075]
    assert m.get_column("line").to_list() == [12, 22, 41, 51, 70, 80]
    assert [(e.step, e.split, e.values["loss"]) for e in p.events] == [
        (4, "eval", 3.8962173461914062),
        (8, "eval", 3.895819664001465),
        (12, "eval", 3.895526647567749),
    ]
    assert p.meta["loss_window_averaged"] is True and p.meta["loss_window_steps"] == 2
    assert p.meta["nonfinite_filtered"] is True
    assert p.meta["caveats"][0].startswith("Hugging Face Trainer: each loss is the mean")
    assert "logging_steps=2" in p.meta["caveats"][0] and "2x" in p.meta["caveats"][0]
    assert p.meta["summary"] is None  # a checkpoint's state: train() had not returned
    # every line: a record (first line of an entry), an event, or entry body / structure
    continued = p.meta["continued_lines"]
    assert m.height + len(p.events) + continued + p.ignored == lines.height


def test_rewound_output_directory():
    run = run_of(FIXTURES / "rewind")
    # launch A's history to step 12 (abandoned after step 4), then launch B's from step 6
    assert run.metrics.get_column("step").to_list() == [2, 4, 6, 8, 10, 12, 6, 8, 10]
    assert run.metrics.get_column("segment").to_list() == [0] * 6 + [1] * 3
    (r,) = run.events_of("restart")
    assert (r.step, r.resume_step, r.last_step_before, r.lost_steps) == (6, 4, 12, 8)
    assert "checkpoint-12/trainer_state.json" in (r.text or "")
    traj = run.trajectory()
    assert traj.get_column("step").to_list() == [2, 4, 6, 8, 10, 12]
    assert traj.get_column("lr").to_list()[2:5] == [0.0005, 0.0003, 0.0001]  # B's schedule
    vals = [(e.step, e.segment) for e in run.events_of("validation")]
    assert vals == [(4, 0), (8, 0), (12, 0), (8, 1), (10, 1)]


def test_summary_row_goes_to_metadata():
    part = hf_trainer.read_path(FIXTURES / "rewind")[0]
    assert part.meta["summary"]["train_loss"] == pytest.approx(3.9, abs=0.01)
    assert part.meta["summary"]["step"] == 10
    assert part.meta["trainer_state"]["global_step"] == 10
    assert "1 rewound launch(es) found" in part.meta["caveats"][-1]


def text_state(rows: list[dict], **extra) -> str:
    state = {"global_step": 0, "log_history": rows, "logging_steps": 5, **extra}
    return json.dumps(state, indent=2, sort_keys=True)


def parse_text(text: str):
    lines, _ = split_lines(text.encode())
    return hf_trainer.parse(lines, "x.json"), lines


def test_nan_loss_eval_prefixes_and_other_keys():
    rows = [
        {"epoch": 0.1, "loss": float("nan"), "grad_norm": float("inf"), "step": 5,
         "learning_rate": 1e-4, "mean_token_accuracy": 0.5},
        {"eval_loss": 2.0, "eval_accuracy": 0.25, "epoch": 0.1, "step": 5},
        {"eval_wiki_loss": 2.5, "step": 5},
        {"test_loss": 1.5, "test_runtime": 3.0, "step": 10},
    ]  # fmt: skip
    p, lines = parse_text(text_state(rows))
    m = p.metrics.row(0, named=True)
    assert math.isnan(m["loss"]) and m["grad_norm"] == math.inf and m["lr"] == 1e-4
    assert m["mean_token_accuracy"] == 0.5
    got = [(e.step, e.split, e.values) for e in p.events]
    assert got == [
        (5, "eval", {"loss": 2.0, "accuracy": 0.25}),
        (5, "eval", {"wiki_loss": 2.5}),
        (10, "test", {"loss": 1.5, "runtime": 3.0}),
    ]
    assert "logging_steps=5" in p.meta["caveats"][0]


def test_compact_json_still_reads():
    text = json.dumps({"global_step": 2, "log_history": [{"loss": 1.0, "step": 1}]})
    p, _ = parse_text(text)
    assert p.metrics.get_column("loss").to_list() == [1.0]


def test_comment_lines_above_the_json_are_left_out(tmp_path):
    body = json.dumps({"global_step": 2, "log_history": [{"loss": 1.0, "step": 1}]}, indent=2)
    text = "# source: someone/repo trainer_state.json (a collector's line)\n# note: whole\n" + body
    p, _ = parse_text(text)
    assert p.metrics.select("step", "loss").rows() == [(1, 1.0)]
    path = tmp_path / "trainer_state.json"
    path.write_text(text.replace("\n", "\r\n"))
    (run,) = parsers.read_logs(path)
    assert run.metrics.select("step", "loss").rows() == [(1, 1.0)]


def test_a_state_pasted_into_prose_and_cut_short_keeps_its_complete_entries():
    rows = [{"epoch": 0.1 * i, "loss": 2.0 - 0.1 * i, "step": 10 * i} for i in range(1, 4)]
    body = json.dumps({"global_step": 750, "logging_steps": 10, "log_history": rows}, indent=2)
    whole, _ = parse_text("Thanks! `" + body + "` I ran it twice.")
    assert whole.metrics.select("step", "loss").rows() == [(10, 1.9), (20, 1.8), (30, 1.7)]
    assert not any("cut short" in c for c in whole.meta["caveats"])
    cut = body[: body.index('"step": 30')]  # inside the third entry
    p, _ = parse_text("Thanks! `" + cut)
    assert p.metrics.select("step", "loss").rows() == [(10, 1.9), (20, 1.8)]
    assert p.meta["trainer_state"]["global_step"] == 750
    assert p.meta["caveats"][-1] == (
        "the JSON is cut short inside log_history: its 2 complete entries were read, "
        "the rest is lost"
    )
    # the lines of the cut entry are put aside, not counted as the last record's
    assert p.metrics.get_column("line").to_list() == [5, 10]


def test_a_piece_of_log_history_pasted_alone_is_read_with_its_lines(tmp_path):
    rows = [{"epoch": 1.0 + i / 10, "loss": 0.5 - i / 100, "step": 900 + 100 * i} for i in range(3)]
    rows.insert(2, {"epoch": 1.1, "eval_loss": 0.7, "step": 1000})
    entries = json.dumps({"log_history": rows}, indent=2).splitlines()[2:-2]  # no head
    path = tmp_path / "piece.txt"
    path.write_text("# source: an issue\n" + "\n".join(entries) + ',\n    {\n      "loss": 0.4\n')
    assert hf_trainer.sniff(path.read_text().splitlines()) == 60
    (run,) = parsers.read_logs(path)
    assert run.metrics.select("step", "loss", "line").rows() == [
        (900, 0.5, 2),
        (1000, 0.49, 7),
        (1100, 0.48, 17),
    ]
    assert [(e.kind, e.step, e.values) for e in run.events] == [("validation", 1000, {"loss": 0.7})]
    assert run.meta.loss_window_steps == 100  # from the entries' spacing
    assert any(c.startswith("a piece of log_history without") for c in run.meta.caveats)
    assert any("cut short inside log_history" in c for c in run.meta.caveats)


def test_bad_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="not a readable trainer_state.json"):
        parse_text('{"log_history": [')
    with pytest.raises(InputError, match="no log_history list"):
        parse_text('{"global_step": 3}')
    with pytest.raises(InputError, match="no trainer_state.json"):
        hf_trainer.read_path(tmp_path)


def test_sniffing():
    head = (FIXTURES / "trainer_state.json").read_text().splitlines()
    assert hf_trainer.sniff(head) == 95
    assert hf_trainer.sniff(['{"step": 1, "loss": 2}']) == 0
    assert hf_trainer.sniff_path(FIXTURES / "rewind") == 90
    assert hf_trainer.sniff_path(FIXTURES / "rewind" / "checkpoint-4") == 90
    assert hf_trainer.sniff_path(FIXTURES / "trainer_state.json") == 0  # a file: by its text
    assert hf_trainer.sniff_path(FIXTURES.parent / "nanogpt") == 0


def test_written_here_by_transformers(tmp_path):
    """The real Trainer, a few steps: rows and the flags come through unchanged."""
    pytest.importorskip("transformers", reason="transformers not installed")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate")
    torch = pytest.importorskip("torch", reason="torch not installed")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = [{"input_ids": torch.arange(8) % 5, "labels": torch.arange(8) % 5}] * 16
    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=4, logging_steps=3,
        save_steps=6, report_to=[], use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    model = GPT2LMHeadModel(GPT2Config(vocab_size=8, n_positions=8, n_embd=8, n_layer=1, n_head=1))
    Trainer(model=model, args=args, train_dataset=data).train()
    part = hf_trainer.read_path(tmp_path)[0]
    assert part.metrics.get_column("step").to_list() == [3, 6]
    state = json.loads((tmp_path / "checkpoint-6" / "trainer_state.json").read_text())
    logged = [r["loss"] for r in state["log_history"] if "loss" in r]
    assert part.metrics.get_column("loss").to_list() == logged
    assert part.meta["loss_window_steps"] == 3
