"""The statistics of the MinAtar report on hand-built cases: last-100 average, MinAtar's running
average, values at a frame count and on a grid, mean ± standard error, Welch's interval."""

import numpy as np
import pytest
from scipy import stats

from reporting.minatar_seeds import (
    last_average,
    mean_and_standard_error,
    on_grid,
    running_average,
    value_at,
    welch_interval,
)


def test_last_average_covers_all_episodes_until_the_window_is_full():
    np.testing.assert_array_equal(last_average([1, 2, 3, 4, 5], window=3), [1, 1.5, 2, 3, 4])


def test_last_average_drops_the_episodes_before_the_last_100():
    curve = last_average(np.arange(150))
    assert curve[99] == 49.5  # episodes 0..99
    assert curve[149] == 99.5  # episodes 50..149, not 0..149 (74.5)


def test_running_average_is_minatars_from_zero():
    # 0.99 · 0 + 0.01 · 10 = 0.1; 0.99 · 0.1 + 0.01 · 20 = 0.299; 0.99 · 0.299 − 0.3 = −0.00399
    np.testing.assert_allclose(running_average([10, 20, -30]), [0.1, 0.299, -0.00399], rtol=1e-12)
    constant = running_average(np.full(100, 5.0))
    assert constant[-1] == pytest.approx(5 * (1 - 0.99**100), rel=1e-12)


def test_value_at_takes_the_last_episode_ended_by_then():
    frames, curve = np.array([10, 20, 30]), np.array([1.0, 2.0, 3.0])
    assert value_at(frames, curve, 25) == 2.0
    assert value_at(frames, curve, 30) == 3.0
    assert np.isnan(value_at(frames, curve, 9))


def test_on_grid_is_unknown_before_the_first_episode_and_after_training():
    grid = on_grid([10, 20, 30], [1.0, 2.0, 3.0], [5, 10, 25, 30, 35], trained=32)
    np.testing.assert_array_equal(grid, [np.nan, 1.0, 2.0, 3.0, np.nan])
    assert np.isnan(on_grid([], [], [5, 10], trained=10)).all()


def test_mean_and_standard_error_over_seeds():
    # sample variance of 1, 2, 3, 6: (4 + 1 + 0 + 9) / 3; standard error √(14/3) / √4
    mean, error = mean_and_standard_error([1.0, 2.0, 3.0, 6.0])
    assert mean == 3.0 and error == pytest.approx(np.sqrt(14 / 3) / 2, rel=1e-14)
    mean, error = mean_and_standard_error([7.0])
    assert mean == 7.0 and np.isnan(error)
    # Per column, NaN (a seed that has not trained that far) left out.
    mean, error = mean_and_standard_error([[1.0, np.nan, np.nan], [3.0, 5.0, np.nan]])
    np.testing.assert_array_equal(mean, [2.0, 5.0, np.nan])
    np.testing.assert_array_equal(error, [1.0, np.nan, np.nan])


def test_welch_interval_by_hand():
    # Variances 1 and 4 over 3 seeds each: standard error √(1/3 + 4/3), and
    # ν = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 50/17.
    difference, low, high = welch_interval([1, 2, 3], [4, 6, 8])
    half_width = stats.t.ppf(0.975, 50 / 17) * np.sqrt(5 / 3)
    assert difference == -4.0
    assert (low, high) == pytest.approx((-4 - half_width, -4 + half_width), rel=1e-12)
    assert (low, high) == pytest.approx((-8.155399503182505, 0.1553995031825055), rel=1e-12)


def test_welch_interval_matches_scipy():
    generator = np.random.default_rng(0)
    a, b = generator.normal(1, 2, size=5), generator.normal(0, 0.5, size=3)
    expected = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.9)
    difference, low, high = welch_interval(a, b, confidence=0.9)
    assert difference == pytest.approx(a.mean() - b.mean(), rel=1e-12)
    assert (low, high) == pytest.approx((expected.low, expected.high), rel=1e-12)


def test_welch_interval_needs_two_values_a_side():
    difference, low, high = welch_interval([5.0], [1.0, 2.0])
    assert difference == 3.5 and np.isnan(low) and np.isnan(high)
    assert welch_interval([2.0, 2.0], [1.0, 1.0]) == (1.0, 1.0, 1.0)
    assert np.isnan(welch_interval([], [1.0, 2.0])).all()
