"""torchtitan stdout: a crash-and-relaunch log in torchtitan's logger format, colour
codes included (fixtures/torchtitan/make_log.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _rows import assert_fixture_rows, text_run

from logbook.run import Run
from logbook.textio import read_lines, split_lines
from parsers import torchtitan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "torchtitan"
CASES = ["llama3_debug.log"]


def run_of(path: Path) -> Run:
    return text_run(torchtitan, path)


@pytest.mark.parametrize("case", CASES)
def test_fixture_gives_its_expected_rows(case, tmp_path):
    assert_fixture_rows(torchtitan, FIXTURES, case, tmp_path)


def test_records_launches_and_events():
    run = run_of(FIXTURES / "llama3_debug.log")
    m = run.metrics
    assert m.get_column("step").to_list() == list(range(1, 14))
    assert m.get_column("segment").to_list() == [0] * 10 + [1] * 3
    row = m.row(0, named=True)
    assert (row["loss"], row["grad_norm"], row["memory_gib"], row["memory_pct"]) == (
        8.12345, 2.5, 1.25, 1.57,
    )  # fmt: skip
    assert (row["tps"], row["tflops"], row["mfu_pct"]) == (41236.0, 2.47, 0.26)
    assert str(row["time"]) == "2025-03-04 10:15:03+00:00"
    (save,) = run.events_of("checkpoint_save")
    assert (save.step, save.save_time_s) == (10, 0.52)
    (crash,) = run.events_of("hardware_failure")
    assert (crash.cause, crash.step) == ("oom", 10)
    (restart,) = run.events_of("restart")
    assert (restart.resume_step, restart.last_step_before, restart.cause) == (10, 10, "oom")
    (val,) = run.events_of("validation")
    assert val.step == 5 and val.values == {
        "loss": 6.2345, "memory_gib": 1.3, "memory_pct": 1.63, "tps": 51234.0,
    }  # fmt: skip


def test_every_line_accounted_for():
    lines, _ = read_lines(FIXTURES / "llama3_debug.log")
    p = torchtitan.parse(lines, "x.log")
    assert p.unrecognized.to_list() == [18, 19]  # traceback lines without the prefix
    assert p.metrics.height + len(p.events) + p.ignored + p.unrecognized.len() == lines.height


def test_line_variants():
    text = (
        "step:  1  loss:  9.8765  memory: 10.00GiB(12.50%)  tps: 1,234  tflops: 5.00  "
        "mfu: N/A\n"
        "[rank0]:[titan] 2025-01-01 00:00:01,250 - root - INFO - step: 2  loss: 9.50000  "
        "grad_norm:  1.0000  memory: 10.00GiB(12.50%)  tps: 2,345  tflops: 6.00  mfu: 1.50%\n"
    )
    lines, _ = split_lines(text.encode())
    m = torchtitan.parse(lines, "x.log").metrics
    assert m.get_column("loss").to_list() == [9.8765, 9.5]
    assert m.get_column("grad_norm").to_list() == [None, 1.0]
    assert m.get_column("mfu_pct").to_list() == [None, 1.5]
    assert m.get_column("tps").to_list() == [1234.0, 2345.0]
    assert [str(t) for t in m.get_column("time").to_list()] == [
        "None", "2025-01-01 00:00:01.250000+00:00",
    ]  # fmt: skip


def test_sniff():
    head = (FIXTURES / "llama3_debug.log").read_text().splitlines()
    assert torchtitan.sniff(head) == 90
    assert torchtitan.sniff(head[:3]) == 40
    assert torchtitan.sniff(["iter 1: loss 2.0, time 1.00ms, mfu 1.00%"]) == 0
