"""The rank-based distribution P(rank) ∝ rank^−α cut into k segments of equal probability
(Schaul et al. 2016, Appendix B.2.1): pure functions of the ranks, used by the sampler."""

import numpy as np
from numba import njit


@njit(cache=True)
def draw_in_segments(
    heap_slots, starts, ends, rank_probabilities, uniforms, slots_out, probabilities_out
):
    """Draw j: a uniform heap position in [starts[j], ends[j]) (clamped below ends[j] against
    rounding of uniform · length), and the probability of that position."""
    for j in range(uniforms.shape[0]):
        position = starts[j] + np.int64(uniforms[j] * (ends[j] - starts[j]))
        position = min(position, ends[j] - 1)
        slots_out[j] = heap_slots[position]
        probabilities_out[j] = rank_probabilities[j]


def rank_cumulative_weights(count: int, priority_exponent: float) -> np.ndarray:
    """c[i] = Σ_{r=1}^{i+1} r^−α: the unnormalized CDF of the power law over ranks."""
    return np.cumsum(np.arange(1, count + 1, dtype=np.float64) ** -priority_exponent)


def equal_probability_segments(cumulative: np.ndarray, size: int, batch_size: int):
    """(starts, ends, rank_probability) of k = batch_size segments of heap positions.

    size ≥ k: boundaries at the rank edges nearest the quantiles j/k of the power law over
    ranks 1..size, then nudged so each segment holds at least one rank; the segments tile
    [0, size) and every rank of segment j has probability 1/(k · length_j).
    size < k: segment j is the single position holding the quantile (j + ½)/k, nudged so
    every position is used; a position used by c segments has probability c/k.
    """
    k = batch_size
    cumulative = cumulative[:size]
    total = cumulative[-1]
    if size >= k:
        quantiles = total * np.arange(1, k) / k
        holder = np.minimum(np.searchsorted(cumulative, quantiles), size - 1)  # holds it
        below = np.where(holder > 0, cumulative[np.maximum(holder - 1, 0)], 0.0)
        nearer_end = cumulative[holder] - quantiles < quantiles - below
        offsets = np.arange(1, k)
        lifted = np.maximum.accumulate(np.maximum(holder + nearer_end - offsets, 0))
        boundaries = np.minimum(lifted, size - k) + offsets  # strictly increasing, < size
        starts = np.concatenate(([0], boundaries))
        ends = np.concatenate((boundaries, [size]))
        return starts, ends, 1.0 / (k * (ends - starts))
    quantiles = total * (np.arange(k) + 0.5) / k
    holder = np.minimum(np.searchsorted(cumulative, quantiles), size - 1)
    offsets = np.arange(k)
    # Steps of 0 or 1 from position 0 up to size − 1, so that every position is used.
    positions = np.maximum(np.minimum.accumulate(holder - offsets), size - k) + offsets
    counts = np.bincount(positions, minlength=size)
    return positions, positions + 1, counts[positions] / k


def refit_last_segment(starts, ends, rank_probabilities, size: int) -> None:
    """Makes a partition built for a nearby size (≥ k, with starts[-1] < size) end at `size`:
    the last segment becomes [starts[-1], size), its ranks sharing its 1/k (in place)."""
    ends[-1] = size
    rank_probabilities[-1] = 1.0 / (len(starts) * (size - starts[-1]))
