"""Synthetic logs of the tolerant reader, one quirk a file (fixtures/text/README.md):
each against its expected rows, every line accounted for, and the facts of each quirk."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from _rows import assert_lines_accounted, file_rows

import parsers

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "text"
LOGS = sorted(FIXTURES.glob("*.log"))


def expected_files(log: Path) -> list[Path]:
    """The expected rows of each run in ``log``: ``<name>.expected.jsonl`` for the first,
    ``<name>.<k>.expected.jsonl`` for run k (a file with several runs)."""
    more = sorted(FIXTURES.glob(f"{log.stem}.[0-9]*.expected.jsonl"))
    return [log.with_suffix(".expected.jsonl"), *more]


def runs_of(log: Path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the sources in the expected rows are relative to the root
    return parsers.read_logs(str(log.relative_to(ROOT)))


def test_fixtures_are_there():
    assert len(LOGS) == 16
    assert {p.name for p in LOGS} == set(FACTS)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fixture_gives_its_expected_rows(log, tmp_path, monkeypatch):
    runs = runs_of(log, monkeypatch)
    want = expected_files(log)
    assert len(runs) == len(want)
    for k, (run, expected) in enumerate(zip(runs, want, strict=True)):
        out = tmp_path / f"run{k}.jsonl"
        run.write(out)
        got, rows = file_rows(out), file_rows(expected)
        assert got[0] == rows[0]  # the header: format, sources, caveats, parse statistics
        assert got[1:] == rows[1:]  # the metrics and event rows


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_every_line_is_accounted_for(log):
    parsed, stats = parsers.parse_file(log)
    text = log.read_bytes().decode()
    # LF, CR LF and a lone CR each end a line
    breaks = len(re.findall(r"\r\n|\n|\r", text))
    assert stats.lines == breaks + (not text.endswith(("\n", "\r")))
    assert_lines_accounted(parsed, stats.lines)


# fixture -> (format, steps, loss, events by kind, ignored, unrecognized lines)
FACTS = {
    "prefix_timestamp.log": ("text", [1, 2, 3, 4, 5], [2.5, 2.4, 2.3, 2.2, 2.1], {}, 0, []),
    "prefix_ranks.log": (
        "text",
        [1, 2, 3, 4, 5, 6, 7, 8],
        [2.5, 2.4, 2.3, 2.2, 2.1, 2.0, 1.9, 1.8],
        {},
        0,
        [],
    ),
    "prefix_decor.log": (
        "text",
        [1, 2, 3, 4, 5, 6, 7],
        [2.5, 2.4, 2.3, 2.2, 2.1, 2.0, 1.9],
        {},
        0,
        [],
    ),
    "tqdm_redraws.log": (
        "text",
        [10, 11, 12, 13, 14, 15],
        [2.51, 2.5, 2.49, 2.47, 2.45, 2.44],
        {},
        0,
        [],
    ),
    "units.log": (
        "text",
        [1, 2, 3, 4, 5, 6],
        [12.0, math.nan, math.nan, math.inf, -math.inf, 2.4],
        {"nonfinite": 4},
        0,
        [],
    ),
    "cut_record.log": ("text", [1, 2, 3, 4, 5], [2.5, 2.4, 2.3, 2.2, 2.1], {}, 0, []),
    "rank_copies.log": ("text", [1, 2, 3], [2.5, 2.4, 2.3], {}, 3, []),
    "olmo_multiline.log": ("olmo", [1, 2, 3], [10.98, 10.71, 10.43], {}, 0, []),
    "hf_dicts_no_step.log": (
        "hf-trainer-log",
        [1, 2, 3],
        [2.3115, 2.2011, 2.1234],
        {"validation": 1},
        1,
        [],
    ),
    "hf_dicts_logging_steps.log": (
        "hf-trainer-log",
        [10, 20, 30],
        [2.3115, 2.2011, 2.1234],
        {},
        6,
        [],
    ),
    "validation.log": ("text", [10, 20, 30, 40], [2.5, 2.4, 2.3, 2.2], {"validation": 2}, 0, []),
    "crash_restart.log": (
        "text",
        [1, 2, 3, 4, 3, 4, 5],
        [2.5, 2.4, 2.3, 2.2, 2.31, 2.21, 2.1],
        {"checkpoint_save": 1, "hardware_failure": 1, "restart": 1},
        3,
        [],
    ),
    "two_runs.log": ("text", [1, 2, 3], [2.5, 2.4, 2.3], {}, 0, []),
    "unknown_line.log": ("text", [1, 2, 3], [2.5, 2.4, 2.3], {}, 2, [2]),
    "keras_reduce_lr_on_plateau_from_epoch4.log": (
        "text",
        [6000, 7500, 9000, 10499, 10500, 11999, 12000],
        [0.4012, 0.39, 0.3412, 0.3311, 0.3311, 0.329, 0.329],
        {"lr_change": 2},
        1,
        [],
    ),
    "hf_relaunch_training_arguments.log": (
        "hf-trainer-log",
        [10, 20, 30, 40, 50, 60, 70, 60, 70, 80, 90, 100, 110],
        [2.9, 2.8, 2.7, 2.6, 2.5, 2.4, 2.3, 2.4, 2.3, 2.2, 2.1, 2.0, 1.9],
        {"lr_change": 1, "hardware_failure": 1, "restart": 2},
        32,
        [],
    ),
}


def same_floats(a: list[float], b: list[float]) -> bool:
    pairs = zip(a, b, strict=True) if len(a) == len(b) else None
    return pairs is not None and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in pairs)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_facts_of_each_quirk(name, monkeypatch):
    fmt, steps, loss, kinds, ignored, unrecognized = FACTS[name]
    run = runs_of(FIXTURES / name, monkeypatch)[0]
    assert run.meta.format == fmt
    assert run.metrics.get_column("step").to_list() == steps
    assert same_floats(run.metrics.get_column("loss").to_list(), loss)
    assert dict(Counter(e.kind for e in run.events)) == kinds
    (st,) = run.meta.parse
    assert (st.ignored, st.unrecognized) == (ignored, len(unrecognized))
    assert st.first_unrecognized == unrecognized[:5]


# ---- what each quirk keeps ---------------------------------------------------------------


def metrics(name: str, monkeypatch):
    return runs_of(FIXTURES / name, monkeypatch)[0].metrics


def test_time_stamps_become_the_time_column(monkeypatch):
    times = [str(t) for t in metrics("prefix_timestamp.log", monkeypatch).get_column("time")]
    assert times == [
        "2024-05-01 12:00:00+00:00",
        "2024-05-01 12:00:01.500000+00:00",
        "2024-05-01 12:00:03.250000+00:00",
        "2024-05-01 12:00:04+00:00",
        "2024-05-01 12:00:05.750000+00:00",
    ]


def test_every_redrawn_state_is_a_record_of_its_own_line(monkeypatch):
    # a lone carriage return (a bar redrawn in place) is a line break like a line feed
    m = metrics("tqdm_redraws.log", monkeypatch)
    assert m.get_column("line").to_list() == [1, 2, 3, 4, 5, 6]


def test_units_commas_and_exponents(monkeypatch):
    m = metrics("units.log", monkeypatch)
    assert m.get_column("tokens").to_list() == [
        193831,
        1193831,
        2193831,
        3193831,
        4193831,
        5200000,
    ]
    assert m.get_column("step_time_s").to_list() == [
        412.5 * 1e-3,
        1.25,
        980 * 1e-3,
        0.41,
        415.0 * 1e-3,
        415.0 * 1e-3,
    ]
    assert m.get_column("mfu_pct").to_list() == [38.5, 38.4, 38.1, 38.6, 38.2, 38.2]
    assert m.get_column("mem").to_list() == [11.66, 11.7, 11.7, 11.71, 11.71, 11.71]
    assert m.get_column("lr").to_list() == [3e-4, 3e-4, 0.5e-4, 3e-4, 3e-4, 3e-4]


def test_a_cut_record_keeps_only_its_complete_fields(monkeypatch):
    last = metrics("cut_record.log", monkeypatch).row(-1, named=True)
    assert (last["step"], last["loss"], last["lr"], last["grad_norm"]) == (5, 2.1, None, None)


def test_per_rank_copies_are_kept_once(monkeypatch):
    run = runs_of(FIXTURES / "rank_copies.log", monkeypatch)[0]
    assert run.metrics.get_column("line").to_list() == [2, 4, 6]
    assert run.meta.caveats[0] == "3 per-rank copies or redraws of records dropped"


def test_a_record_spread_over_lines(monkeypatch):
    m = metrics("olmo_multiline.log", monkeypatch)
    assert m.select("step", "line", "lr", "grad_norm").rows() == [
        (1, 1, 4.0e-07, 3.21),
        (2, 7, 8.0e-07, 2.95),
        (3, 13, 1.2e-06, 2.70),
    ]
    assert m.get_column("train_perplexity").to_list() == [58688.3, 44802.1, 33877.4]


def test_hf_dicts_without_a_step_are_numbered(monkeypatch):
    run = runs_of(FIXTURES / "hf_dicts_no_step.log", monkeypatch)[0]
    assert run.meta.caveats == ["no step printed: records numbered in order (1, 2, 3, ...)"]
    assert run.metrics.get_column("epoch").to_list() == [0.02, 0.04, 0.06]
    (val,) = run.events_of("validation")
    assert (val.step, val.source.line) == (3, 4)
    assert val.values == {"loss": 2.0512, "runtime": 12.5, "samples_per_second": 80.1}


def test_hf_dicts_numbered_by_logging_steps(monkeypatch):
    run = runs_of(FIXTURES / "hf_dicts_logging_steps.log", monkeypatch)[0]
    assert run.meta.caveats == ["no step printed: records numbered in order x logging_steps=10"]
    assert run.metrics.get_column("line").to_list() == [7, 8, 9]


def test_validation_lines_are_events_with_their_step(monkeypatch):
    run = runs_of(FIXTURES / "validation.log", monkeypatch)[0]
    got = [(e.step, e.source.line, e.split, e.values) for e in run.events_of("validation")]
    assert got == [
        (20, 3, "val", {"loss": 2.45, "ppl": 11.59}),
        (40, 6, "val", {"loss": 2.28, "ppl": 9.78}),
    ]


def test_crash_then_resume(monkeypatch):
    run = runs_of(FIXTURES / "crash_restart.log", monkeypatch)[0]
    assert run.metrics.get_column("segment").to_list() == [0, 0, 0, 0, 1, 1, 1]
    (crash,) = run.events_of("hardware_failure")
    assert (crash.cause, crash.step, crash.source.line) == ("cuda_error", 4, 9)
    (restart,) = run.events_of("restart")
    assert (restart.resume_step, restart.last_step_before, restart.lost_steps) == (2, 4, 2)
    assert (restart.cause, restart.source.line) == ("cuda_error", 10)
    (save,) = run.events_of("checkpoint_save")
    assert (save.step, save.source.line) == (2, 3)


def test_two_appended_runs(monkeypatch):
    runs = runs_of(FIXTURES / "two_runs.log", monkeypatch)
    assert [r.meta.name for r in runs] == ["two_runs.log", "two_runs.log#2"]
    assert [r.metrics.get_column("step").to_list() for r in runs] == [[1, 2, 3], [1, 2, 3, 4]]
    assert [r.metrics.get_column("line").to_list() for r in runs] == [[1, 2, 3], [4, 5, 6, 7]]
    assert [r.meta.caveats[-1] for r in runs] == [
        "run 1 of 2 in this input",
        "run 2 of 2 in this input",
    ]
    assert [(r.meta.parse[0].first_line, r.meta.parse[0].lines) for r in runs] == [(1, 3), (4, 4)]


def test_a_relaunch_with_another_lr_in_its_training_arguments(monkeypatch):
    run = runs_of(FIXTURES / "hf_relaunch_training_arguments.log", monkeypatch)[0]
    assert run.meta.model_extra["arguments"] == {
        "micro_batch_size": 8,
        "lr": 5e-05,
        "lr_decay_style": "linear",
        "lr_warmup_iters": 0,
        "bf16": False,
        "clip_grad": 1.0,
        "gradient_accumulation_steps": 1,
        "seed": 42,
        "weight_decay": 0.0,
    }
    (change,) = run.events_of("lr_change")
    assert (change.step, change.segment, change.old, change.new) == (60, 1, 5e-05, 2.5e-05)
    assert (change.manual, change.source.line) == (True, 31)
    # the records after the resume go on from the step it states, every logging_steps
    assert run.metrics.filter(pl.col("segment") == 1).get_column("step").to_list()[0] == 60
