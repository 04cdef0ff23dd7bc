"""Rolling statistics of the detectors against plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from logbook.detectors._arrays import prev_window_min


def _naive(x: list[float], window: int) -> list[float]:
    return [min(x[max(0, i - window) : i]) if i else math.nan for i in range(len(x))]


@pytest.mark.parametrize(
    ("n", "window"),
    [(0, 5), (1, 5), (2, 5), (4, 5), (5, 5), (6, 5), (7, 5), (23, 5), (10, 1), (3, 1), (40, 7)],
)
def test_prev_window_min_is_the_minimum_of_the_previous_values(n: int, window: int) -> None:
    x = np.random.default_rng(n * 31 + window).normal(size=n)
    got = prev_window_min(x, window).tolist()
    want = _naive(x.tolist(), window)
    assert len(got) == n
    assert [g if not math.isnan(g) else None for g in got] == [
        w if not math.isnan(w) else None for w in want
    ]


def test_prev_window_min_on_a_known_series() -> None:
    x = np.array([5.0, 3.0, 4.0, 1.0, 6.0, 7.0, 8.0, 2.0])
    assert prev_window_min(x, 3)[1:].tolist() == [5.0, 3.0, 3.0, 1.0, 1.0, 1.0, 6.0]
