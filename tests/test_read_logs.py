"""Several runs in one input: ``parsers.read_logs`` and the command line around it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import invoke

import parsers
from logbook.run import Run


def rec(step: int, loss: float, when: str | None = None) -> str:
    stamp = f"{when} " if when else ""
    return f"{stamp}step {step} | loss {loss:.2f} | lr 1.0e-04\n"


def recs(steps, start_loss: float) -> str:
    return "".join(rec(s, start_loss - i * 0.1) for i, s in enumerate(steps))


FIRST = recs([100, 200, 300], 2.5)  # lines 1-3
SECOND = recs([100, 200, 300, 400], 3.1)  # another run appended: lines 4-7
TWO_RUNS = FIRST + SECOND


def write(tmp_path: Path, text: str, name: str = "train.log") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def steps(run: Run) -> list[int]:
    return run.metrics.get_column("step").to_list()


def column(run: Run, name: str) -> list:
    return run.metrics.get_column(name).to_list()


# ---- read_logs ------------------------------------------------------------------------


def test_one_run(tmp_path):
    (run,) = parsers.read_logs(write(tmp_path, FIRST))
    assert steps(run) == [100, 200, 300]
    assert column(run, "loss") == [2.5, 2.4, 2.3]
    assert column(run, "segment") == [0, 0, 0]
    assert run.meta.name is None
    assert run.events == []
    assert not any(c.startswith("run 1 of") for c in run.meta.caveats)


def test_one_run_is_what_read_log_reads(tmp_path):
    path = write(tmp_path, FIRST)
    (run,) = parsers.read_logs(path)
    assert run.metrics.equals(parsers.read_log(path).metrics)


def test_steps_back_to_the_start_without_a_launch_line_are_another_run(tmp_path):
    runs = parsers.read_logs(write(tmp_path, TWO_RUNS))
    assert [r.meta.name for r in runs] == ["train.log", "train.log#2"]
    assert [steps(r) for r in runs] == [[100, 200, 300], [100, 200, 300, 400]]
    assert [column(r, "line") for r in runs] == [[1, 2, 3], [4, 5, 6, 7]]
    assert [column(r, "loss") for r in runs] == [[2.5, 2.4, 2.3], [3.1, 3.0, 2.9, 2.8]]
    assert [column(r, "segment") for r in runs] == [[0, 0, 0], [0, 0, 0, 0]]
    assert [r.meta.caveats[-1] for r in runs] == [
        "run 1 of 2 in this input",
        "run 2 of 2 in this input",
    ]
    assert all(r.events_of("restart") == [] for r in runs)
    stats = [(r.meta.parse[0].first_line, r.meta.parse[0].lines) for r in runs]
    assert stats == [(1, 3), (4, 4)]


def test_three_runs_are_numbered(tmp_path):
    third = recs([100, 200, 300], 2.9)
    runs = parsers.read_logs(write(tmp_path, FIRST + recs([100, 200, 300], 2.7) + third))
    assert [r.meta.name for r in runs] == ["train.log", "train.log#2", "train.log#3"]
    assert [column(r, "line") for r in runs] == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert runs[2].meta.caveats[-1] == "run 3 of 3 in this input"


def test_a_clock_that_goes_back_is_another_run(tmp_path):
    text = (
        rec(500, 2.5, "2024-05-01 12:00:00")
        + rec(600, 2.4, "2024-05-01 12:01:00")
        + rec(700, 2.3, "2024-05-01 12:02:00")
        + rec(600, 3.0, "2024-05-01 11:00:00")
        + rec(700, 2.9, "2024-05-01 11:01:00")
    )
    runs = parsers.read_logs(write(tmp_path, text))
    assert [steps(r) for r in runs] == [[500, 600, 700], [600, 700]]


def test_a_rewind_past_the_start_without_a_launch_line_stays_one_run(tmp_path):
    text = recs([100, 200, 300, 400], 2.5) + recs([300, 400, 500], 2.2)
    (run,) = parsers.read_logs(write(tmp_path, text))
    assert steps(run) == [100, 200, 300, 400, 300, 400, 500]
    assert column(run, "segment") == [0, 0, 0, 0, 1, 1, 1]
    (restart,) = run.events_of("restart")
    assert (restart.source.line, restart.step, restart.last_step_before) == (5, 300, 400)
    assert restart.text == "step went from 400 back to 300"


@pytest.mark.parametrize(
    "launch",
    [
        "loading checkpoint from /ckpt/iter_0000000",
        "Resuming training from /ckpt/step-0",
    ],
)
def test_a_launch_line_before_the_steps_go_back_makes_a_restart(tmp_path, launch):
    text = FIRST + launch + "\n" + SECOND
    (run,) = parsers.read_logs(write(tmp_path, text))
    assert run.meta.name is None
    assert steps(run) == [100, 200, 300, 100, 200, 300, 400]
    assert column(run, "line") == [1, 2, 3, 5, 6, 7, 8]
    assert column(run, "segment") == [0, 0, 0, 1, 1, 1, 1]
    (restart,) = run.events_of("restart")
    assert (restart.source.line, restart.text) == (4, launch)
    assert (restart.step, restart.segment, restart.last_step_before) == (100, 1, 300)


def test_a_resume_from_a_stated_step(tmp_path):
    text = (
        recs([100, 200, 300, 400], 2.5)
        + "Resuming training from global step 200\n"
        + recs([300, 400, 500], 2.25)
    )
    (run,) = parsers.read_logs(write(tmp_path, text))
    assert steps(run) == [100, 200, 300, 400, 300, 400, 500]
    assert column(run, "segment") == [0, 0, 0, 0, 1, 1, 1]
    (restart,) = run.events_of("restart")
    assert restart.source.line == 5
    assert (restart.resume_step, restart.last_step_before, restart.lost_steps) == (200, 400, 200)


def test_the_files_of_one_run_stay_one_run(tmp_path):
    a = write(tmp_path, recs([100, 200], 2.5), "job0.log")
    b = write(tmp_path, "loading checkpoint from /ckpt\n" + recs([200, 300], 2.35), "job1.log")
    (run,) = parsers.read_logs([a, b])
    assert steps(run) == [100, 200, 200, 300]
    assert column(run, "source") == [0, 0, 1, 1]
    assert column(run, "segment") == [0, 0, 1, 1]
    assert [Path(s).name for s in run.meta.sources] == ["job0.log", "job1.log"]


# ---- the command line -------------------------------------------------------------------


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    """``two_runs.log`` in the working directory."""
    monkeypatch.chdir(tmp_path)
    Path("two_runs.log").write_text(TWO_RUNS)
    return Path("two_runs.log")


def test_parse_prints_one_summary_per_run(monkeypatch, capsys, two_runs):
    code, out, err = invoke(monkeypatch, capsys, "parse", "two_runs.log")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "run two_runs.log:",
        "text: 3 records, 1 segment(s), steps 100..300",
        "events: none",
        "two_runs.log: 3 lines = 3 record + 0 event + 0 continuation + 0 ignored + 0 unrecognized;"
        " 3 records",
        "note: read as generic text: step->step, loss->loss, lr->lr",
        "note: run 1 of 2 in this input",
        "run two_runs.log#2:",
        "text: 4 records, 1 segment(s), steps 100..400",
        "events: none",
        "two_runs.log (from line 4): 4 lines = 4 record + 0 event + 0 continuation + 0 ignored"
        " + 0 unrecognized; 4 records",
        "note: read as generic text: step->step, loss->loss, lr->lr",
        "note: run 2 of 2 in this input",
    ]


def test_parse_of_one_run_prints_no_run_header(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    Path("one.log").write_text(FIRST)
    code, out, _ = invoke(monkeypatch, capsys, "parse", "one.log")
    assert code == 0
    assert out.splitlines()[0] == "text: 3 records, 1 segment(s), steps 100..300"
    assert not any(line.startswith("run ") for line in out.splitlines())


def test_the_note_on_an_input_of_many_runs_names_the_first_ten(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    Path("many.log").write_text("".join(recs([100, 200], 2.0 + i / 10) for i in range(12)))
    code, out, _ = invoke(monkeypatch, capsys, "parse", "many.log", "-o", "out.parquet")  # 12 runs
    names = ", ".join(["many.log"] + [f"many.log#{i}" for i in range(2, 11)])
    assert code == 0
    assert out.splitlines()[-2] == (
        f"note: the input holds 12 runs ({names}, ... and 2 more): written stitched as "
        "one; -o DIR/ writes one file per run, --run NAME one of them"
    )


@pytest.mark.parametrize("target", ["out.parquet", "out.jsonl"])
def test_one_output_file_for_two_runs_gets_them_stitched_and_says_so(
    monkeypatch, capsys, two_runs, target
):
    code, out, err = invoke(monkeypatch, capsys, "parse", "two_runs.log", "-o", target)
    assert (code, err) == (0, "")
    note = (
        "note: the input holds 2 runs (two_runs.log, two_runs.log#2): written stitched as "
        "one; -o DIR/ writes one file per run, --run NAME one of them"
    )
    assert out.splitlines()[-2:] == [note, f"wrote {target}"]
    written = Run.read(target)
    assert written.metrics.get_column("step").to_list() == [100, 200, 300, 100, 200, 300, 400]
    assert written.meta.caveats[-1] == note.removeprefix("note: ")


def test_output_folder_gets_one_parquet_per_run(monkeypatch, capsys, two_runs):
    code, out, err = invoke(monkeypatch, capsys, "parse", "two_runs.log", "-o", "runs/")
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == [
        "wrote runs/two_runs.log.parquet",
        "wrote runs/two_runs.log_2.parquet",
    ]
    assert sorted(p.name for p in Path("runs").iterdir()) == [
        "two_runs.log.parquet",
        "two_runs.log_2.parquet",
    ]
    first = Run.read("runs/two_runs.log.parquet")
    second = Run.read("runs/two_runs.log_2.parquet")
    assert (first.meta.name, steps(first)) == ("two_runs.log", [100, 200, 300])
    assert (second.meta.name, steps(second)) == ("two_runs.log#2", [100, 200, 300, 400])
    assert column(second, "line") == [4, 5, 6, 7]


def test_run_selects_one(monkeypatch, capsys, two_runs):
    code, out, err = invoke(
        monkeypatch, capsys, "parse", "two_runs.log", "--run", "two_runs.log#2", "-o", "b.jsonl"
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "text: 4 records, 1 segment(s), steps 100..400",
        "events: none",
        "two_runs.log (from line 4): 4 lines = 4 record + 0 event + 0 continuation + 0 ignored"
        " + 0 unrecognized; 4 records",
        "note: read as generic text: step->step, loss->loss, lr->lr",
        "note: run 2 of 2 in this input",
        "wrote b.jsonl",
    ]
    run = Run.read("b.jsonl")
    assert (run.meta.name, steps(run), column(run, "loss")) == (
        "two_runs.log#2",
        [100, 200, 300, 400],
        [3.1, 3.0, 2.9, 2.8],
    )


def test_run_selects_the_first_by_the_file_name(monkeypatch, capsys, two_runs):
    code, out, _ = invoke(monkeypatch, capsys, "parse", "two_runs.log", "--run", "two_runs.log")
    assert code == 0
    assert out.splitlines()[0] == "text: 3 records, 1 segment(s), steps 100..300"


def test_unknown_run_is_refused_with_the_names(monkeypatch, capsys, two_runs):
    code, out, err = invoke(monkeypatch, capsys, "parse", "two_runs.log", "--run", "nope")
    assert (code, out) == (2, "")
    assert err == (
        "logbook: error: --run 'nope': not in this input (runs: two_runs.log, two_runs.log#2)\n"
    )


def test_detect_json_rows_carry_the_run_name(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    text = (
        rec(100, 2.5)
        + "step 200 | loss nan | lr 1.0e-04\n"
        + rec(300, 2.3)
        + rec(100, 3.1)
        + "step 200 | loss inf | lr 1.0e-04\n"
        + rec(300, 2.9)
    )
    Path("two_runs.log").write_text(text)
    code, out, err = invoke(monkeypatch, capsys, "detect", "two_runs.log", "--json")
    assert (code, err) == (0, "")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [(r["run"], r["kind"], r["step"], r["message"]) for r in rows] == [
        ("two_runs.log", "nonfinite", 200, "loss nan at step 200"),
        ("two_runs.log#2", "nonfinite", 200, "loss inf at step 200"),
    ]


def test_detect_run_selects_one(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    text = rec(100, 2.5) + "step 200 | loss nan | lr 1.0e-04\n" + rec(300, 2.3) + SECOND
    Path("two_runs.log").write_text(text)
    code, out, _ = invoke(
        monkeypatch, capsys, "detect", "two_runs.log", "--json", "--run", "two_runs.log"
    )
    assert code == 0
    (row,) = [json.loads(x) for x in out.splitlines()]
    assert (row["kind"], row["step"], row["message"]) == ("nonfinite", 200, "loss nan at step 200")
    assert "run" not in row  # one run given: no run name
    code, out, _ = invoke(
        monkeypatch, capsys, "detect", "two_runs.log", "--json", "--run", "two_runs.log#2"
    )
    assert (code, out) == (0, "")


def test_a_sweep_of_tensorboard_runs_is_read_as_one_run_each(tmp_path):
    import shutil

    from logbook.errors import InputError

    restart = Path(__file__).resolve().parents[1] / "fixtures" / "tensorboard" / "restart"
    for name in ("a", "b"):
        shutil.copytree(restart, tmp_path / "sweep" / name)
    runs = parsers.read_logs(tmp_path / "sweep")
    assert [(r.meta.name, r.metrics.height) for r in runs] == [("a", 11), ("b", 11)]
    assert [len(r.events_of("restart")) for r in runs] == [1, 1]
    with pytest.raises(InputError, match=r"written at the same time \(a, b\)"):
        parsers.read_log(tmp_path / "sweep")  # one run asked for: which one is not said
