"""Rolling statistics of the detectors against plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from logbook.detectors._arrays import prev_window_floor, prev_window_median

CASES = [(0, 5), (1, 5), (2, 5), (4, 5), (5, 5), (6, 5), (7, 5), (23, 5), (10, 1), (3, 1), (40, 7)]


def _prev(x: list[float], i: int, window: int) -> list[float]:
    return x[max(0, i - window) : i]


@pytest.mark.parametrize(("n", "window"), CASES)
def test_floor_is_at_most_the_minimum_of_the_previous_values(n: int, window: int) -> None:
    x = np.random.default_rng(n * 31 + window).normal(size=n)
    got = prev_window_floor(x, window)
    assert got.size == n
    for i in range(n):
        prev = _prev(x.tolist(), i, window)
        if not prev:
            assert math.isnan(got[i])
            continue
        assert got[i] <= min(prev)
        # and it is a value of the two blocks of ``window`` rows that hold the window
        b = (i - 1) // window
        assert got[i] == min(x[max(0, (b - 1) * window) : (b + 1) * window])


def test_floor_on_a_known_series() -> None:
    x = np.array([5.0, 3.0, 4.0, 1.0, 6.0, 7.0, 8.0, 2.0])
    # blocks of 3: [5 3 4] [1 6 7] [8 2]; a row's window ends in block (i - 1) // 3
    assert prev_window_floor(x, 3)[1:].tolist() == [3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(("n", "window"), CASES)
def test_median_is_exact_wherever_a_row_can_reach_the_rise(n: int, window: int) -> None:
    rng = np.random.default_rng(n * 7 + window)
    y = rng.normal(size=n) * 0.1
    y[rng.random(n) < 0.2] += 1.0  # some jumps
    lineage = np.zeros(n, dtype=np.int64)
    lineage[n // 2 :] = 1  # two lineages: windows do not cross them
    got = prev_window_median(y, lineage, window, 0.5)
    for i in range(n):
        lo = 0 if i < n // 2 else n // 2
        prev = y[max(lo, i - window) : i]
        if prev.size and y[i] - prev.min() >= 0.5:
            assert got[i] == pytest.approx(float(np.median(prev)), rel=1e-12, abs=1e-15)
        elif not prev.size:
            assert math.isnan(got[i])
        elif not math.isnan(got[i]):  # a candidate of the bound: still the exact median
            assert got[i] == pytest.approx(float(np.median(prev)), rel=1e-12, abs=1e-15)
