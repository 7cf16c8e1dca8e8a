"""Rank-based prioritized replay as the paper implemented it: a binary heap used as an
approximately sorted array, and k segments of equal probability (Schaul et al. 2016,
Section 3.3 and Appendix B.2.1). The class docstring says exactly what is approximated."""

import numpy as np

from replay.binary_heap import heap_insert, heap_remove, heap_update
from replay.rank_segments import (
    draw_in_segments,
    equal_probability_segments,
    rank_cumulative_weights,
    refit_last_segment,
)
from replay.settings import RankBasedReplaySettings
from replay.sum_tree import raise_for_status

# A cached partition is reused while the size is within this fraction of the size it was
# built for (Appendix B.2.1: "We reused the same partition for values of N that are close").
PARTITION_TOLERANCE = 0.01

# state_dict key → attribute, for the state that changes as the sampler runs.
_STATE_ATTRIBUTES = {
    "heap_keys": "_keys",
    "heap_slots": "_slots",
    "heap_positions": "_positions",
    "size": "_size",
    "max_priority": "_max_priority",
    "adds_since_resort": "_adds_since_resort",
    "last_batch_size": "_last_batch_size",
    "partition_size": "_partition_size",
    "partition_batch_size": "_partition_batch_size",
    "partition_end": "_partition_end",
    "partition_starts": "_starts",
    "partition_ends": "_ends",
    "partition_probabilities": "_probabilities",
}


class RankBasedSampler:
    """Draws slots with P(rank) ∝ rank^−α, the paper's rank-based prioritization, implemented
    as the paper did it (Appendix B.2.1). Read this before trusting a number it returns.

    Priorities. The raw priority p the replay buffer computes from the learner's output
    (`replay.priority_signals`, e.g. min(|δ|, clip) + ε) only orders transitions; α
    (`priority_exponent`) enters once, in the rank distribution. A new transition gets the
    largest raw priority ever written (1 at first, Algorithm 1), and with ties rising it goes
    to the top of the heap: a new transition enters at rank 1.

    Heap as an approximately sorted array. Transitions live in an array-based binary max-heap
    keyed on raw priority, with a slot → heap-position map, so add, remove (swap with the last
    entry, then sift) and update (sift) cost O(log N). Heap position h (0-based) is *treated
    as* rank h + 1. That is exact only for a sorted array: a heap only guarantees that a
    parent is not smaller than its children, so the entry at position h has true rank at
    least depth(h) + 1 and possibly far more than h + 1. Every `resort_period` added
    transitions (the paper: 10^6 agent steps, one add per step) the array is fully sorted,
    descending (a sorted array is a valid heap) and the map rebuilt; `resort()` does it on
    demand. How much the disorder matters depends on the data (for random priorities, how far
    the distribution over transitions is from the same segments over true ranks:
    docs/replay.md). The paper reports that learning was unaffected compared with a
    perfectly sorted array.

    Segments. For k = batch_size, ranks 1..N are cut into k segments of (nearly) equal
    probability under the power law: the boundaries are the rank edges nearest the quantiles
    j/k of Σ_{r≤n} r^−α (exact cumulative sums, tabulated once per α up to capacity), nudged
    so each segment holds at least one rank. Draw j is a uniform rank within segment j: one
    draw per segment, a stratified minibatch. With N < k segments are single ranks and may
    repeat (the rank holding quantile (j + ½)/k, every rank used at least once).

    The distribution actually sampled, and what `sample` returns. Each segment gets mass
    exactly 1/k spread uniformly over its ranks: a rank in segment j has probability
    1/(k · length_j) (for N < k: c/k for a rank used by c segments). `sample` returns those
    probabilities, so importance weights correct for the distribution really used, and
    `min_probability` is the smallest of them (the last, longest segment's).

    Approximation error versus the exact power law P(r) = r^−α / Σ r^−α: nearly all of it is
    inside segments, where the density is flattened (at N = 10^6, k = 32, α = 0.7 segment 1
    spans ranks 1–30, whose exact probabilities differ by a factor 30^0.7 ≈ 11), not in the
    segment masses; a partition reused at the edge of the tolerance adds a little (the
    figures, which tests/replay/test_rank_based.py checks: docs/replay.md).

    Cache rule. The partition is reused while k and α are unchanged and the size stays within
    PARTITION_TOLERANCE (1 %) of the size it was built for; otherwise it is rebuilt
    (O(k log N)). A reused partition always ends at the current N: its last segment is
    stretched or shrunk to [start, N) and its probability recomputed, so no draw ever yields a
    rank > N and every current rank can be drawn. It is never reused across N < k. Only
    `sample` and `min_probability` keep the partition they use; `probabilities` reports the
    one `sample` would use without keeping it, so that asking never changes a later draw.

    Invariants: `_keys[:_size]` is a max-heap; `_slots[h]` is the slot at heap position h and
    `_positions[slot]` its position (−1 when not sampleable).
    """

    settings = RankBasedReplaySettings

    @classmethod
    def from_settings(cls, settings: RankBasedReplaySettings, rng: np.random.Generator):
        return cls(
            settings.capacity,
            rng,
            priority_exponent=settings.priority_exponent,
            resort_period=settings.resort_period,
        )

    def __init__(
        self,
        capacity: int,
        rng: np.random.Generator,
        *,
        priority_exponent: float = RankBasedReplaySettings.priority_exponent,
        resort_period: int = RankBasedReplaySettings.resort_period,
    ):
        self._rng = rng
        self._keys = np.zeros(capacity, dtype=np.float64)
        self._slots = np.zeros(capacity, dtype=np.int64)
        self._positions = np.full(capacity, -1, dtype=np.int64)
        self._size = 0
        self._max_priority = 1.0
        self._adds_since_resort = 0
        self._last_batch_size = 0
        self.resort_period = int(resort_period)
        self.set_priority_exponent(priority_exponent)

    def add(self, index: int) -> None:
        """Makes a slot sampleable as a new transition: maximal raw priority, rank 1."""
        if self._member(index):
            raise ValueError(f"slot {index} is already sampleable")
        heap_insert(self._keys, self._slots, self._positions, self._size, index, self._max_priority)
        self._size += 1
        self._adds_since_resort += 1
        if self._adds_since_resort >= self.resort_period:
            self.resort()

    def remove(self, index: int) -> None:
        if not self._member(index):
            raise ValueError(f"slot {index} is not sampleable")
        heap_remove(self._keys, self._slots, self._positions, self._size, index)
        self._size -= 1

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, probabilities): one draw per segment, probabilities as actually used."""
        starts, ends, rank_probabilities = self._segments(batch_size)
        self._last_batch_size = batch_size
        slots = np.empty(batch_size, dtype=np.int64)
        probabilities = np.empty(batch_size, dtype=np.float64)
        draw_in_segments(
            self._slots,
            starts,
            ends,
            rank_probabilities,
            self._rng.random(batch_size),
            slots,
            probabilities,
        )
        return slots, probabilities

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Re-keys sampleable slots with their raw priorities (finite, >= 0); a repeated slot
        keeps its last one."""
        indices = np.ascontiguousarray(indices, dtype=np.int64).reshape(-1)
        priorities = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
        if indices.shape != priorities.shape:
            raise ValueError(f"{indices.size} indices but {priorities.size} priorities")
        status, largest = heap_update(
            self._keys, self._slots, self._positions, self._size, indices, priorities
        )
        raise_for_status(status)
        self._max_priority = max(self._max_priority, largest)

    def min_probability(self) -> float:
        """Smallest probability of any current rank, for the batch size last sampled."""
        if self._last_batch_size == 0:
            raise ValueError("min_probability needs the batch size: sample first")
        return float(self._segments(self._last_batch_size)[2].min())

    def probabilities(self, batch_size: int) -> np.ndarray:
        """For every slot, the probability of its heap position under the partition
        `sample(batch_size)` would use now (0 where not sampleable): the mean of the k
        per-segment uniform distributions, 1/(k · length_j) in segment j (for N < k, c/k for
        a position c single-position segments share)."""
        starts, ends, rank_probabilities = self._partition(batch_size)[:3]
        per_position = np.zeros(self._size)
        for start, end, probability in zip(starts, ends, rank_probabilities, strict=True):
            per_position[start:end] = probability  # N < k: repeats carry the same c/k
        probabilities = np.zeros(self._positions.shape[0])
        probabilities[self._slots[: self._size]] = per_position
        return probabilities

    def priorities(self) -> np.ndarray:
        """Raw priorities of the sampleable slots, in heap order."""
        return self._keys[: self._size].copy()

    @property
    def max_priority(self) -> float:
        """Largest raw priority ever written (1 before any update), never raised to α."""
        return self._max_priority

    def __len__(self) -> int:
        return self._size

    def resort(self) -> None:
        """Sorts the heap array descending (ties keep their order) and rebuilds the map."""
        order = np.argsort(-self._keys[: self._size], kind="stable")
        self._keys[: self._size] = self._keys[order]
        self._slots[: self._size] = self._slots[order]
        self._positions[self._slots[: self._size]] = np.arange(self._size)
        self._adds_since_resort = 0

    def set_priority_exponent(self, priority_exponent: float) -> None:
        """Changes α: retabulates the rank CDF (O(capacity)); ranks stay as they are."""
        self.priority_exponent = float(priority_exponent)
        self._cumulative = rank_cumulative_weights(self._keys.shape[0], self.priority_exponent)
        self._forget_partition()

    def state_dict(self) -> dict:
        """Everything needed to continue exactly, except the rng (the caller saves that)."""
        state = {
            "capacity": self._keys.shape[0],
            "priority_exponent": self.priority_exponent,
            "resort_period": self.resort_period,
        }
        for key, attribute in _STATE_ATTRIBUTES.items():
            value = getattr(self, attribute)
            state[key] = value.copy() if isinstance(value, np.ndarray) else value
        return state

    def load_state_dict(self, state: dict) -> None:
        if int(state["capacity"]) != self._keys.shape[0]:
            raise ValueError(
                f"state has capacity {state['capacity']}, sampler has {self._keys.shape[0]}"
            )
        self.set_priority_exponent(float(state["priority_exponent"]))  # retabulates the CDF
        self.resort_period = int(state["resort_period"])
        for key, attribute in _STATE_ATTRIBUTES.items():
            current = getattr(self, attribute)
            if isinstance(current, np.ndarray):
                setattr(self, attribute, np.array(state[key], dtype=current.dtype))
            else:
                setattr(self, attribute, type(current)(state[key]))

    def _segments(self, batch_size: int):
        """The partition for the current size, rebuilt or reused by the cache rule, and kept."""
        if batch_size == self._partition_batch_size and self._size == self._partition_end:
            return self._starts, self._ends, self._probabilities  # the common case
        self._starts, self._ends, self._probabilities, rebuilt = self._partition(batch_size)
        if rebuilt:
            self._partition_size, self._partition_batch_size = self._size, batch_size
        self._partition_end = self._size
        return self._starts, self._ends, self._probabilities

    def _partition(self, batch_size: int):
        """(starts, ends, rank probabilities, rebuilt): the partition the cache rule gives for
        the current size, without keeping it (the arrays may be the kept ones: read only)."""
        size = self._size
        if size == 0:
            raise ValueError("cannot sample from an empty replay")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if batch_size == self._partition_batch_size and size == self._partition_end:
            return self._starts, self._ends, self._probabilities, False
        built_for, starts = self._partition_size, self._starts
        reusable = (
            batch_size == self._partition_batch_size
            and min(size, built_for) >= batch_size
            and abs(size - built_for) <= PARTITION_TOLERANCE * built_for
            and starts[-1] < size
        )
        if not reusable:
            return (*equal_probability_segments(self._cumulative, size, batch_size), True)
        ends, rank_probabilities = self._ends.copy(), self._probabilities.copy()
        refit_last_segment(starts, ends, rank_probabilities, size)
        return starts, ends, rank_probabilities, False

    def _forget_partition(self) -> None:
        self._partition_size, self._partition_batch_size, self._partition_end = 0, 0, 0
        self._starts = np.zeros(1, dtype=np.int64)
        self._ends = np.zeros(1, dtype=np.int64)
        self._probabilities = np.zeros(1)

    def _member(self, index: int) -> bool:
        if not 0 <= index < self._positions.shape[0]:
            raise IndexError(f"slot {index} is outside [0, {self._positions.shape[0]})")
        return bool(self._positions[index] >= 0)
