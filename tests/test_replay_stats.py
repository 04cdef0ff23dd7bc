"""Counterfactual statistics: Wilson and Newcombe intervals, Welch's interval."""

import math

import pytest

from replay.stats import mean_difference, rate_difference, spread, t95, wilson


def test_wilson_interval_of_a_rate():
    # textbook values: 4 of 5 -> 0.376..0.964; 0 of 5 -> 0..0.434 (not a point)
    assert wilson(4, 5) == pytest.approx((0.3755, 0.9638), abs=1e-4)
    assert wilson(0, 5) == pytest.approx((0.0, 0.4345), abs=1e-4)
    assert wilson(5, 5) == pytest.approx((0.5655, 1.0), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_rate_difference_interval():
    d, lo, hi = rate_difference(1, 5, 5, 5)
    assert d == pytest.approx(-0.8)
    assert (lo, hi) == pytest.approx((-0.9638, -0.1926), abs=1e-4)
    assert rate_difference(0, 5, 0, 5) == pytest.approx((0.0, -0.4345, 0.4345), abs=1e-4)


def test_mean_difference_is_welchs():
    a, b = spread([2.1, 2.2, 2.0, 2.15, 2.05]), spread([3.0, 3.2, 2.9, 3.1, 3.05])
    assert (a.n, a.mean) == (5, pytest.approx(2.1))
    assert a.sd == pytest.approx(math.sqrt(0.025 / 4))
    d, lo, hi = mean_difference(a, b)
    se = math.sqrt(a.sd**2 / 5 + b.sd**2 / 5)
    assert d == pytest.approx(-0.95)
    # Welch's df is 7.2 here, rounded down to 7 (t = 2.365)
    assert (hi - lo) / 2 == pytest.approx(2.365 * se)
    assert mean_difference(spread([1.0]), b) is None  # one value: no spread
    assert spread([None, float("nan")]).mean is None


def test_t_quantiles():
    assert (t95(1), t95(4), t95(30), t95(200)) == (12.706, 2.776, 2.042, 1.959964)
    assert t95(0.5) == math.inf
