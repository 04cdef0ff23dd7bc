"""nanoGPT stdout: a sample in nanoGPT's print formats, and the output of the minimal
loop that prints them (fixtures/nanogpt/tiny_train.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _rows import assert_fixture_rows, parse_accounted, text_run

import parsers
from logbook.detectors import detect
from logbook.run import Run
from parsers import nanogpt

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nanogpt"
CASES = ["shakespeare_char.log", "tiny_spike.log"]


def run_of(path: Path) -> Run:
    return text_run(nanogpt, path)


@pytest.mark.parametrize("case", CASES)
def test_fixture_gives_its_expected_rows(case, tmp_path):
    assert_fixture_rows(nanogpt, FIXTURES, case, tmp_path)


def parse_text(text: str):
    return parse_accounted(nanogpt, text)


def test_records_evals_saves_and_resume():
    p = parse_text((FIXTURES / "shakespeare_char.log").read_text())
    m = p.metrics
    assert m.get_column("step").to_list() == [0, 10, 20, 240, 250, 260, 250, 260, 500]
    assert m.get_column("loss").to_list()[:3] == [4.2654, 3.2164, 2.7856]
    assert m.get_column("step_time_s").to_list()[:2] == [29.80345, 0.03128]
    assert m.get_column("mfu_pct").to_list()[:2] == [None, 11.91]  # -100.00% = not measured
    kinds = [(e.kind, e.step, e.source.line) for e in p.events]
    assert kinds == [
        ("config_change", None, 11),  # Overriding: max_iters = 500
        ("validation", 0, 20),
        ("validation", 250, 25),
        ("checkpoint_save", 250, 26),
        ("restart", None, 31),
        ("validation", 250, 33),
    ]
    assert (p.events[0].key, p.events[0].new) == ("max_iters", "500")
    assert p.events[1].values == {"loss": 4.2823, "train_loss": 4.2874}
    assert p.unrecognized.to_list() == [29, 30]  # the traceback; the echoed config is ignored


def test_nan_loss_and_unknown_lines():
    p = parse_text("iter 1: loss nan, time 10.00ms, mfu 1.00%\nhello\n\n")
    assert str(p.metrics.get_column("loss")[0]) == "nan"
    assert p.unrecognized.to_list() == [2] and p.ignored == 1


def test_forks_extra_and_missing_fields_are_read():
    text = (
        "step 0: train loss 4.2850, val loss 4.2848, train ppl 72.5993, val ppl 72.5846\n"
        "iter 0: loss 4.2627, ppl 71.0037, time 3286.79ms, mfu -100.00%\n"
        "iter 10: loss 3.1680, ppl 23.7589, time 444.91ms, mfu 0.42%\n"
        "iter 100: loss 3.21, ppl 24.8, time 50.2ms\n"  # (no mfu)
        "iter 110: loss 3.20, lr 6.0e-04, time 50.0ms, mfu 0.43%\n"
        "iter 120: loss nan, time 13\n"  # (cut short: its time is no time)
    )
    p = parse_text(text)
    m = p.metrics
    assert m.columns == ["line", "step", "loss", "ppl", "step_time_s", "mfu_pct", "lr", "time"]
    assert m.select("line", "step", "ppl", "mfu_pct", "lr").rows() == [
        (2, 0, 71.0037, None, None),  # -100.00%: not measured yet
        (3, 10, 23.7589, 0.42, None),
        (4, 100, 24.8, None, None),
        (5, 110, None, 0.43, 6.0e-04),
        (6, 120, None, None, None),
    ]
    assert m.get_column("loss").to_list()[:4] == [4.2627, 3.168, 3.21, 3.2]
    assert m.get_column("step_time_s").to_list() == [3.28679, 0.44491, 0.0502, 0.05, None]
    (ev,) = p.events
    assert (ev.kind, ev.step, ev.source.line) == ("validation", 0, 1)
    assert ev.values == {"loss": 4.2848, "train_loss": 4.285, "train_ppl": 72.5993, "ppl": 72.5846}
    assert p.unrecognized.to_list() == [] and p.ignored == 0
    assert nanogpt.sniff(["iter 100: loss 3.21, ppl 24.8, time 50.2ms"]) == 90


def test_a_ppl_excerpt_reads_as_nanogpt():
    name = "nanogpt_pr705_ppl_field_in_iter_and_eval_lines.log"
    path = FIXTURES.parent / "real" / "nanogpt" / name
    assert parsers.sniff(path) == "nanogpt"
    (run,) = parsers.read_logs(path)
    assert run.metrics.get_column("step").to_list() == [0, 10, 20, 30, 40]
    assert run.metrics.get_column("ppl").to_list()[-1] == 12.8428
    assert [e.step for e in run.events_of("validation")] == [0, 25]


def test_sniff():
    assert nanogpt.sniff(["iter 0: loss 4.2654, time 29803.45ms, mfu -100.00%"]) == 90
    assert nanogpt.sniff(["step 0: train loss 4.2874, val loss 4.2823"]) == 80
    assert nanogpt.sniff(["step: 1  loss:  8.1  memory: 1.0GiB(1.0%)  tps: 1"]) == 0


def test_the_minimal_loop_prints_what_the_parser_reads(tmp_path):
    pytest.importorskip("torch", reason="torch not installed")
    import subprocess
    import sys

    script = FIXTURES / "tiny_train.py"
    out = subprocess.run(
        [sys.executable, str(script), "--iters", "30", "--spike-at", "1000"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    p = parse_text(out.stdout)
    assert p.metrics.get_column("step").to_list() == list(range(31))
    assert [e.step for e in p.events if e.kind == "validation"] == [0, 25]
    assert p.unrecognized.len() == 0


def test_build_nanogpt_log_txt_train_lines_are_records_val_and_hella_evaluations(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text(
        "0 val 10.9310\n0 hella 0.2413\n0 train 10.934416\n1 train 10.883945\n"
        "2 train nan\n3 train 10.1\n3 val 9.9\n"
    )
    assert parsers.sniff(path) == "nanogpt-logtxt"
    (run,) = parsers.read_logs(path)
    assert run.metrics.select("line", "step").rows() == [(3, 0), (4, 1), (5, 2), (6, 3)]
    assert run.metrics.get_column("loss").to_list()[:2] == [10.934416, 10.883945]
    got = [(e.kind, e.step, getattr(e, "values", None)) for e in run.events]
    assert got == [
        ("validation", 0, {"loss": 10.931}),
        ("validation", 0, {"hella_acc": 0.2413}),
        ("nonfinite", 2, None),
        ("validation", 3, {"loss": 9.9}),
    ]


def test_an_lr_given_again_at_a_relaunch_is_an_lr_change(tmp_path):
    head = "Overriding config with config/x.py:\nlearning_rate = 1e-3\n"
    one = (
        head
        + "Overriding: learning_rate = 0.1\n"
        + "".join(
            f"iter {i}: loss {4 - i / 100:.4f}, time 31.00ms, mfu 11.00%\n"
            for i in range(0, 70, 10)
        )
    )
    two = head + "Overriding: init_from = resume\nOverriding: learning_rate = 0.06\n"
    two += "Resuming training from out\n" + "".join(
        f"iter {i}: loss {4 - i / 100:.4f}, time 31.00ms, mfu 11.00%\n" for i in range(40, 80, 10)
    )
    (tmp_path / "a.log").write_text(one)
    (tmp_path / "b.log").write_text(two)
    run = parsers.read_log([tmp_path / "a.log", tmp_path / "b.log"])
    lrs = [(e.step, e.old, e.new, e.manual) for e in run.events_of("lr_change")]
    assert lrs == [(0, None, 0.1, True), (40, 0.1, 0.06, True)]  # from the next record on
    (cfg,) = run.events_of("config_change")
    assert (cfg.key, cfg.new, cfg.step) == ("init_from", "resume", 40)
    found = [(f.kind, f.step, f.evidence.get("old"), f.evidence.get("new")) for f in detect(run)]
    # the LR the run started with is not a change; the relaunch's cut is
    assert [f for f in found if f[0] == "lr_change"] == [("lr_change", 40, 0.1, 0.06)]
