"""Plain metric tables (format ``csv``): the step column, or the rows' order without one."""

from __future__ import annotations

from pathlib import Path

import pytest

import parsers
from logbook.errors import InputError


def _run(tmp_path: Path, text: str, name: str = "losses.csv"):
    p = tmp_path / name
    p.write_text(text)
    (run,) = parsers.read_logs(p)
    return run


def test_a_table_of_losses_without_a_step_column_numbers_its_rows(tmp_path):
    run = _run(tmp_path, "loss,lr\n2.5,0.001\n2.4,0.001\nnan,0.001\n2.3,1e-3\n")
    assert run.meta.format == "csv"
    assert run.metrics.get_column("step").to_list() == [1, 2, 3, 4]
    assert run.metrics.get_column("lr").to_list() == [0.001] * 4
    assert run.metrics.get_column("line").to_list() == [2, 3, 4, 5]
    assert "no step column: rows numbered 1.. as the steps (one row a step)" in run.meta.caveats
    assert [e.step for e in run.events_of("nonfinite")] == [3]


def test_a_pandas_index_column_is_the_step(tmp_path):
    run = _run(tmp_path, ",train_loss,val_loss\n0,2.5,2.6\n1,2.4,2.5\n2,9.1,2.5\n")
    assert run.metrics.get_column("step").to_list() == [0, 1, 2]
    assert run.metrics.get_column("loss").to_list() == [2.5, 2.4, 9.1]
    assert any("unnamed first column" in c for c in run.meta.caveats)


def test_a_stepless_table_of_words_is_not_read_as_metrics(tmp_path):
    with pytest.raises(InputError, match="unrecognized log format"):
        _run(tmp_path, "loss_name,owner\ncross entropy,alice\nfocal,bob\n", "notes.csv")


SWEEP = (
    "learning_rate_0.005,learning_rate_0.01,learning_rate_0.1\n"
    "4.6032,4.6282,4.6078\n"
    "4.3977,4.2388,4.9911\n"
    "4.0176,,nan\n"
)


def test_a_column_per_run_is_read_as_one_run_a_column(tmp_path):
    p = tmp_path / "learning_rate_error.csv"
    p.write_text(SWEEP)
    runs = parsers.read_logs(p)
    assert [r.meta.name for r in runs] == [
        "learning_rate_0.005",
        "learning_rate_0.01",
        "learning_rate_0.1",
    ]
    assert [r.metrics.get_column("step").to_list() for r in runs] == [[1, 2, 3], [1, 2], [1, 2, 3]]
    assert [r.metrics.get_column("line").to_list() for r in runs] == [[2, 3, 4], [2, 3], [2, 3, 4]]
    assert runs[0].metrics.get_column("loss").to_list() == [4.6032, 4.3977, 4.0176]
    assert runs[1].metrics.get_column("loss").to_list() == [4.6282, 4.2388]
    assert runs[2].metrics.get_column("loss").to_list()[:2] == [4.6078, 4.9911]
    assert [e.step for e in runs[2].events_of("nonfinite")] == [3]
    assert runs[0].meta.caveats[0] == (
        "a column per run (3 runs: learning_rate_0.005, ...), no step column: row k is step k "
        "of every run; no header names the metric: the values read as the loss"
    )
    stats = runs[0].meta.parse[0]
    assert (stats.lines, stats.records, stats.ignored, stats.unrecognized) == (4, 3, 1, 0)


@pytest.mark.parametrize(
    "header",
    [
        "loss,lr",  # metrics, not runs
        "lr_0.1,seed_1",  # two names
        "lr_0.1,lr_0.1",  # one run twice
        "alpha,beta",  # no swept value
    ],
)
def test_only_one_name_with_distinct_values_makes_a_column_per_run(header):
    from parsers import table

    assert table._per_run(header.split(",")) is None


def test_the_per_run_header_needs_rows_of_numbers():
    from parsers import table

    assert table.sniff(["lr_0.1,lr_0.01", "2.5,2.6", "2.4,2.5"]) == 40
    assert table.sniff(["lr_0.1,lr_0.01", "done,2.6", "2.4,2.5"]) == 0


def test_rows_with_evaluation_values_and_no_training_loss_are_validations(tmp_path):
    text = "step,train_loss,val_loss,lr\n490,0.4265,,5.79e-05\n500,0.4234,,5.89e-05\n"
    text += "500,,0.2445,\n510,0.4206,,5.99e-05\n"
    run = _run(tmp_path, text)
    assert run.metrics.get_column("step").to_list() == [490, 500, 510]
    assert run.metrics.get_column("loss").to_list() == [0.4265, 0.4234, 0.4206]
    (val,) = run.events_of("validation")
    assert (val.step, val.split, val.values) == (500, "val", {"loss": 0.2445})
    stats = run.meta.parse[0]
    assert (stats.records, stats.event_lines, stats.ignored) == (3, 1, 1)
