"""Training returns summarized per run and over seeds. Pure numpy (and scipy's t quantile): no
files, no plotting.

A run's episodes are in the order they ended: `frames[i]` is the frame count at the end of
episode i (increasing) and `returns[i]` its return. A curve over episodes (`last_average`,
`running_average`) has one value per episode, the value after that episode ended.
"""

import warnings

import numpy as np
from numpy.typing import ArrayLike

LAST_EPISODES = 100  # the window of the smoothed training return
# MinAtar's examples/dqn.py running average: avg ← (1 − rate)·avg + rate·G, from avg = 0.
RUNNING_AVERAGE_RATE = 0.01


def last_average(returns: ArrayLike, window: int = LAST_EPISODES) -> np.ndarray:
    """After each episode, the mean return of the last `window` episodes ended by then (all of
    them while fewer have ended)."""
    returns = np.asarray(returns, dtype=np.float64)
    sums = np.concatenate([[0.0], np.cumsum(returns)])
    ends = np.arange(1, returns.size + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def running_average(returns: ArrayLike, rate: float = RUNNING_AVERAGE_RATE) -> np.ndarray:
    """After each episode, MinAtar's running average avg ← (1 − rate)·avg + rate·G from 0: it
    weighs the last ~1 / rate episodes and starts biased towards 0 (that recursion, as a
    filter)."""
    from scipy.signal import lfilter  # only this report needs scipy: the others run without

    return lfilter([rate], [1.0, rate - 1.0], np.asarray(returns, dtype=np.float64))


def value_at(frames: ArrayLike, curve: ArrayLike, at: float) -> float:
    """The curve after the last episode that ended at or before `at` frames; NaN if none had."""
    index = int(np.searchsorted(frames, at, side="right")) - 1
    return float(curve[index]) if index >= 0 else np.nan


def on_grid(frames: ArrayLike, curve: ArrayLike, grid: ArrayLike, trained: float) -> np.ndarray:
    """`value_at` each grid point up to `trained` frames (how far the run is known to have
    trained), NaN beyond it: a run does not speak for frames it has not played."""
    grid = np.asarray(grid, dtype=np.float64)
    index = np.searchsorted(frames, grid, side="right") - 1
    known = (index >= 0) & (grid <= trained)
    values = np.full(grid.shape, np.nan)
    values[known] = np.asarray(curve, dtype=np.float64)[index[known]]
    return values


def mean_and_standard_error(values: ArrayLike) -> tuple:
    """Over the seeds (axis 0), NaN values left out: (mean, standard error = sample standard
    deviation / √n). The mean is NaN without a value, the standard error with fewer than two;
    floats for a 1-D input, arrays for 2-D."""
    values = np.asarray(values, dtype=np.float64)
    count = np.sum(~np.isnan(values), axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # empty or single columns: NaN, as wanted
        mean = np.nanmean(values, axis=0)
        deviation = np.nanstd(values, axis=0, ddof=1)
    error = np.where(count >= 2, deviation / np.sqrt(np.maximum(count, 1)), np.nan)
    mean = np.where(count >= 1, mean, np.nan)
    return mean[()], error[()]


def welch_interval(a: ArrayLike, b: ArrayLike, confidence: float = 0.95) -> tuple:
    """(mean(a) − mean(b), low, high): Welch's t interval for the difference of the means,
    which does not assume equal variances (scipy's). The bounds are NaN when either sample has
    fewer than two values (no variance to estimate), and equal the difference when both samples
    are constant. Everything is NaN when either sample is empty."""
    from scipy.stats import ttest_ind

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        return np.nan, np.nan, np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a single or constant sample: as said
        interval = ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
    return float(a.mean() - b.mean()), float(interval.low), float(interval.high)
