import numpy as np
import polars as pl

from logbook.report.downsample import lineage_series, minmax_bins


def test_small_input_is_kept_whole_in_step_order():
    x, y = minmax_bins(np.array([3, 1, 2]), np.array([30.0, 10.0, 20.0]), bins=10)
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert y.tolist() == [10.0, 20.0, 30.0]


def test_non_finite_values_are_left_out():
    x, y = minmax_bins(np.arange(5), np.array([1.0, np.nan, np.inf, -np.inf, 5.0]), bins=10)
    assert x.tolist() == [0.0, 4.0]
    assert y.tolist() == [1.0, 5.0]


def test_empty_and_constant_series():
    x, y = minmax_bins(np.array([]), np.array([]), bins=10)
    assert x.size == 0 and y.size == 0
    x, y = minmax_bins(np.arange(1000), np.full(1000, 2.5), bins=10)
    assert set(y.tolist()) == {2.5}
    assert x.size <= 40
    assert x[0] == 0 and x[-1] == 999


def test_a_single_record_spike_survives_a_million_points():
    n = 1_000_000
    steps = np.arange(1, n + 1)
    values = 2.0 + 0.01 * np.sin(steps / 50.0)
    values[654_321] = 9.0  # step 654322
    values[12_345] = -3.0  # step 12346
    x, y = minmax_bins(steps, values, bins=1000)
    assert x.size <= 4000
    assert y.max() == 9.0 and x[np.argmax(y)] == 654_322
    assert y.min() == -3.0 and x[np.argmin(y)] == 12_346
    assert np.all(np.diff(x) > 0)  # strictly increasing: a drawable line
    assert x[0] == 1 and x[-1] == n


def test_each_bin_keeps_first_min_max_last_in_step_order():
    steps = np.arange(16)
    values = np.array([5, 1, 9, 6, 5, 5, 5, 5, 7, 0, 8, 7, 7, 7, 7, 7], dtype=float)
    x, y = minmax_bins(steps, values, bins=2)  # 16 points > 4 * 2: binned
    assert x.tolist() == [0, 1, 2, 7, 8, 9, 10, 15]
    assert y.tolist() == [5, 1, 9, 5, 7, 0, 8, 7]


def test_lineages_are_separated_by_nan():
    frame = pl.DataFrame(
        {"step": [1, 2, 3, 2, 3], "lineage": [0, 0, 0, 1, 1], "loss": [3.0, 2.0, 1.0, 5.0, 6.0]}
    )
    x, y = lineage_series(frame, "loss")
    assert x[:3].tolist() == [1, 2, 3] and np.isnan(x[3]) and x[4:].tolist() == [2, 3]
    assert y[:3].tolist() == [3.0, 2.0, 1.0] and np.isnan(y[3]) and y[4:].tolist() == [5.0, 6.0]


def test_steps_in_order_pick_the_same_points_as_steps_shuffled():
    """Steps already in order (a trajectory) are binned without sorting; the points are
    those the general path picks from the same records in any order, ties included."""
    rng = np.random.default_rng(7)
    steps = np.unique(rng.integers(0, 200_000, 60_000)).astype(np.float64)
    values = rng.integers(0, 5, steps.size).astype(np.float64)  # many equal values a bin
    values[::997] = np.nan
    shuffled = rng.permutation(steps.size)
    for bins in (1, 7, 1200):
        x, y = minmax_bins(steps, values, bins)
        sx, sy = minmax_bins(steps[shuffled], values[shuffled], bins)
        assert x.size <= 4 * bins < np.isfinite(values).sum()  # binned, not kept whole
        np.testing.assert_array_equal(x, sx)
        np.testing.assert_array_equal(y, sy)
