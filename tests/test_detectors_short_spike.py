"""short_spike: loss jumps in excerpts too short for the rolling statistics."""

import numpy as np
import polars as pl

from logbook.detectors import DETECTORS, build_context, detect
from logbook.run import Run

SHORT = DETECTORS["short_spike"]


def run_of(steps: list[int], loss: list[float]) -> Run:
    return Run(metrics=pl.DataFrame({"step": steps, "loss": loss}))


def test_three_record_paste_is_one_spike():
    # 6.44 -> 11.42 -> 7.16: x1.77 the record before, back under 1.2x at the next one
    (f,) = SHORT(build_context(run_of([7000, 7010, 7220], [6.444662, 11.42026, 7.155109])))
    assert (f.kind, f.detector, f.severity) == ("loss_spike", "short_spike", "warning")
    assert (f.step, f.start_step, f.end_step) == (7010, 7010, 7010)
    assert f.score == 1.77205
    assert "a short excerpt: 3 records" in f.message


def test_a_rise_to_the_end_is_not_recovered_and_critical():
    loss = [6.365808, 6.598378, 7.314456, 9.121927, 10.23865]
    (f,) = SHORT(build_context(run_of([6900, 6910, 6920, 6930, 6940], loss)))
    assert (f.start_step, f.end_step, f.step, f.severity) == (6930, 6940, 6940, "critical")
    assert "not recovered" in f.message


def test_quiet_on_a_falling_loss_a_constant_one_and_a_single_record():
    assert SHORT(build_context(run_of([1, 2, 3, 4], [9.0, 7.0, 6.0, 5.5]))) == []
    assert SHORT(build_context(run_of([1, 2, 3], [2.0, 2.0, 2.0]))) == []
    assert SHORT(build_context(run_of([5], [3.0]))) == []


def test_quiet_on_the_rest_of_a_longer_run():
    loss = list(np.linspace(5.0, 4.0, 30))
    loss[20] = 12.0
    assert SHORT(build_context(run_of(list(range(1, 31)), loss))) == []


def test_a_spike_loss_spike_finds_is_reported_once():
    steps = list(range(1, 21))
    loss = [10.0 - 0.1 * i for i in range(20)]
    loss[12:15] = [30.0, 29.0, 28.0]
    found = [f for f in detect(run_of(steps, loss)) if f.kind == "loss_spike"]
    assert [(f.detector, f.start_step) for f in found] == [("loss_spike", 13)]


def test_quiet_on_a_loss_within_the_range_the_excerpt_already_swings_over():
    # UCTransNet's 0.564, 0.417, 0.647, 0.660: x1.35 the median before, but only x1.02
    # the 0.647 two records before: the excerpt's own noise
    assert SHORT(build_context(run_of([367, 368, 369, 370], [0.564, 0.417, 0.647, 0.66]))) == []
    # out of that range by 1.15x (0.202 over 0.154): a rise, x1.38 the median only, in a
    # series that swings x1.37 a record about its trend: told, as info
    loss = [0.147, 0.125, 0.095, 0.146, 0.154, 0.119, 0.151, 0.202, 0.118]
    (f,) = SHORT(build_context(run_of(list(range(10, 100, 10)), loss)))
    assert (f.step, f.severity) == (80, "info")
    assert "before; within the excerpt's own swings (x1.37 a record about its trend)" in f.message
    # within the range but x1.5 the median: 201.8 after a warm-up that started at 190.6
    loss = [190.633, 153.861, 135.086, 113.572, 109.87, 116.719, 201.842, 133.516]
    (f,) = SHORT(build_context(run_of(list(range(1, 9)), loss)))
    assert (f.step, round(f.score, 3)) == (7, 1.603)


def test_the_first_records_of_a_longer_run_are_judged_on_their_own():
    # a char-RNN at LR 0.1: 4.61, 4.99, 4.29, 6.45, then back down over four records
    # (loss_spike's noise scale is still the descent's there)
    loss = [4.61, 4.99, 4.29, 6.45, 5.71, 5.30, 4.83, 4.31] + list(np.linspace(4.2, 3.0, 52))
    found = SHORT(build_context(run_of(list(range(1, 61)), loss)))
    assert [(f.severity, f.start_step, f.end_step, f.message) for f in found] == [
        (
            "warning",
            4,
            5,
            "loss 6.45 at step 4, x1.40 the 4.61 of the 3 record(s) before (the run's first "
            "20 records, judged on their own)",
        )
    ]
    # a rise over the first record alone is not judged in a longer run
    loss = [0.42, 0.575, 0.40] + list(np.linspace(0.39, 0.2, 40))
    assert SHORT(build_context(run_of(list(range(1, 44)), loss))) == []


def test_a_series_that_swings_every_record_gives_info_a_steady_one_a_spike():
    # OpenNMT-py's xent going 2.01, 3.82, 2.10, 3.30, 2.21, ... every report: the
    # excerpt's own noise, each rise told as info
    loss = [2.01, 3.82, 2.10, 3.30, 2.21, 2.82, 2.60, 3.65, 3.23]
    found = SHORT(build_context(run_of(list(range(31150, 31600, 50)), loss)))
    assert [(f.step, f.severity) for f in found] == [(31200, "info"), (31300, "info")]
    # a jump in a steady descent (chainer's MNIST after a resume) stands out of it
    loss = [0.1936, 0.0745, 0.0484, 0.037, 0.027, 0.0728, 0.0218, 0.0154, 0.013, 0.0142]
    (f,) = SHORT(build_context(run_of(list(range(1, 11)), loss)))
    assert (f.step, f.severity, round(f.score, 3)) == (6, "warning", 1.504)
    # three records give no swing to measure: judged on the ratio alone
    (f,) = SHORT(build_context(run_of([1, 2, 3], [6.44, 11.42, 7.16])))
    assert f.severity == "warning"


def test_a_rise_to_the_end_after_one_record_is_a_warning_not_critical():
    # litgpt's iter 65496..65498: 1.203, 1.582, 1.557, then a traceback: x1.31 one record
    # on, not recovered; one record says too little of the level to call it critical
    (f,) = SHORT(build_context(run_of([65496, 65497, 65498], [1.203, 1.582, 1.557])))
    assert (f.step, f.severity) == (65497, "warning")
    assert "not recovered by the end of the excerpt" in f.message
