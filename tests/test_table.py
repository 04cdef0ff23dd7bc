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
