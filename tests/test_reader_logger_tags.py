"""Logger tags and stamps the reader takes off a line before reading its values."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
from _rows import only_run

from parsers.reader.clean import cleaned, stamp_times

NANOTRON = (
    "12/03/2024 10:15:42 [INFO|DP=0|PP=0|TP=0|ip-10-0-0-1]: iteration: 10 / 100 | "
    "consumed_tokens: 1.31M | elapsed_time_per_iteration_ms: 1.2K | tokens_per_sec: 1.1K | "
    "tokens_per_sec_per_gpu: 137 | global_batch_size: 8 | lm_loss: 10.5 | lr: 0.0003 | "
    "model_tflops_per_gpu: 12.3 | hardware_tflops_per_gpu: 12.3 | grad_norm: 2.1\n"
    "12/03/2024 10:15:44 [INFO|DP=0|PP=0|TP=0|ip-10-0-0-1]: iteration: 11 / 100 | "
    "consumed_tokens: 1.44M | elapsed_time_per_iteration_ms: 1.19K | tokens_per_sec: 1.1K | "
    "tokens_per_sec_per_gpu: 138 | global_batch_size: 8 | lm_loss: 10.3 | lr: 0.0003 | "
    "model_tflops_per_gpu: 12.4 | hardware_tflops_per_gpu: 12.4 | grad_norm: 1.9\n"
)


_run = only_run


def test_a_nanotron_line_reads_its_stamp_and_not_its_rank_tag(tmp_path):
    run = _run(tmp_path, NANOTRON)
    m = run.metrics
    assert set(m.columns) == {
        "step", "segment", "time", "source", "line", "loss", "lr", "grad_norm", "tokens",
        "batch_size", "step_time_s", "tokens_per_sec", "tokens_per_sec_per_gpu",
        "model_tflops_per_gpu", "hardware_tflops_per_gpu",
    }  # fmt: skip
    assert m.select("line", "step", "loss", "lr", "grad_norm").rows() == [
        (1, 10, 10.5, 0.0003, 2.1),
        (2, 11, 10.3, 0.0003, 1.9),
    ]
    assert m.get_column("time").to_list() == [
        datetime(2024, 12, 3, 10, 15, 42, tzinfo=UTC),
        datetime(2024, 12, 3, 10, 15, 44, tzinfo=UTC),
    ]
    assert m.get_column("tokens").to_list() == [1_310_000, 1_440_000]
    assert m.get_column("step_time_s").to_list() == [1.2, 1.19]  # 1.2K ms
    assert m.get_column("tokens_per_sec").to_list() == [1100.0, 1100.0]
    assert m.get_column("batch_size").to_list() == [8, 8]
    (stats,) = run.meta.parse
    assert (stats.lines, stats.record_lines, stats.ignored, stats.unrecognized) == (2, 2, 0, 0)
    assert run.meta.train_iters == 100


def test_nanotron_2025_colours_no_year_and_time_per_iteration(tmp_path):
    # since 2025 nanotron colours its prefix, drops the year and renames the step time
    line = (
        "\x1b[2;3m12/03 10:15:{s:02d} [INFO|DP=0|PP=0|TP=0|ip-10-0-0-1]\x1b[0m: "
        "iteration: {i} / 100 | consumed_tokens: {t}M | time_per_iteration_ms: 1.2K"
        " | tokens_per_sec: 1.1K | tokens_per_sec_per_gpu: 137 | global_batch_size: 1.05M"
        " | grad_norm: 2.1 | lm_loss: {loss} | lr: 0.0003 | model_tflops_per_gpu: 12.3"
        " | eta: 0:01:48\n"
    )
    text = line.format(s=42, i=10, t=1.31, loss=10.5) + line.format(s=43, i=11, t=1.44, loss=10.3)
    text += "\x1b[1;33m12/03 10:15:43 [WARNING|DP=1|PP=0|TP=0|ip-10-0-0-2]\x1b[0m: a warning\n"
    run = _run(tmp_path, text)
    m = run.metrics
    assert "dp" not in m.columns and "ip" not in m.columns
    assert m.select("step", "loss", "step_time_s", "tokens").rows() == [
        (10, 10.5, 1.2, 1_310_000),
        (11, 10.3, 1.2, 1_440_000),
    ]
    assert m.get_column("time").null_count() == 2  # (no year: no time)
    (stats,) = run.meta.parse
    assert (stats.record_lines, stats.unrecognized, stats.first_unrecognized) == (2, 1, [3])


def test_logger_tags_of_pipe_separated_fields_come_off():
    text = pl.Series(
        [
            "01/17/2024 13:47:27 [INFO|DP=0|PP=0|TP=0|ip-26-0-160-225]: iteration: 991 / 1000",
            "[WARNING|DP=1|PP=0|TP=0]: lm_loss: 2.5",
            "[INFO|trainer.py:1815] 2024-05-01 12:00:00,123 >> ***** Running training *****",
            "[INFO|2024-12-08 01:11:13] llamafactory.train.callbacks:157 >> {'loss': 1.2}",
            "[DP=0|PP=1] step 3 loss 2.0",
            "a | b [x|y] step 2",  # (a bracket of words is not a logger's tag)
        ]
    )
    got = cleaned(text)
    assert got.get_column("s").to_list() == [
        "01/17/2024 13:47:27 iteration: 991 / 1000",
        "lm_loss: 2.5",
        "2024-05-01 12:00:00,123 >> ***** Running training *****",
        "{'loss': 1.2}",
        "step 3 loss 2.0",
        "a | b [x|y] step 2",
    ]
    assert got.get_column("stamp").to_list() == [
        "01/17/2024 13:47:27",
        None,
        "2024-05-01 12:00:00,123",
        "2024-12-08 01:11:13",  # (taken before its tag came off)
        None,
        None,
    ]


def test_slashed_dates_are_month_first_unless_a_day_says_otherwise():
    month_first = stamp_times(pl.Series(["01/02/2024 10:00:00", "12/03/2024 10:15:42.5"]))
    assert month_first.to_list() == [
        datetime(2024, 1, 2, 10, tzinfo=UTC),
        datetime(2024, 12, 3, 10, 15, 42, 500000, tzinfo=UTC),
    ]
    # one first number above 12: the whole file is day first
    day_first = stamp_times(pl.Series(["01/02/2024 10:00:00", "13/02/2024 10:00:00"]))
    assert day_first.to_list() == [
        datetime(2024, 2, 1, 10, tzinfo=UTC),
        datetime(2024, 2, 13, 10, tzinfo=UTC),
    ]
