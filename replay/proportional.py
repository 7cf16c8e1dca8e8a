"""Proportional prioritized replay: P(i) = p_i^α / Σ_k p_k^α over a sum tree (Schaul et al.
2016, Section 3.3 and Appendix B.2.1)."""

import numpy as np
from numba import njit

from replay.settings import ProportionalReplaySettings
from replay.sum_tree import (
    SLOT_NOT_SAMPLEABLE,
    SLOT_OUT_OF_RANGE,
    VALUE_INVALID,
    SumTree,
    raise_for_status,
    write_leaves,
)


@njit(cache=True)
def _store_priorities(raw, leaves, block_sums, stale_blocks, indices, priorities, exponent):
    """Stores raw priorities (last write wins) and writes p^α to the tree leaves.

    Returns (status, largest raw priority of the batch). Nothing is written unless every
    index is in range and currently sampleable (raw > 0), so a stale index never revives a
    removed slot, and every priority is positive and finite (NaN never enters the tree).
    """
    count = indices.shape[0]
    capacity = raw.shape[0]
    largest = 0.0
    for i in range(count):
        if indices[i] < 0 or indices[i] >= capacity:
            return SLOT_OUT_OF_RANGE, largest
        if raw[indices[i]] <= 0.0:
            return SLOT_NOT_SAMPLEABLE, largest
        if not (priorities[i] > 0.0 and priorities[i] < np.inf):
            return VALUE_INVALID, largest
        largest = max(largest, priorities[i])
    leaf_values = np.empty(count, dtype=np.float64)
    for i in range(count):
        raw[indices[i]] = priorities[i]
        leaf_values[i] = priorities[i] ** exponent
    status = write_leaves(leaves, block_sums, stale_blocks, capacity, indices, leaf_values)
    return status, largest


class ProportionalSampler:
    """Draws slot i with probability P(i) = p_i^α / Σ_k p_k^α (the paper's Equation 1).

    p is the raw priority the replay buffer computes from the learner's output
    (`replay.priority_signals`, e.g. min(|δ|, clip) + ε); α (`priority_exponent`) is applied
    exactly once, when a leaf of the sum tree is written. A new transition gets the largest
    raw priority ever written (starting at 1, Algorithm 1 line 6); that running maximum is
    kept in raw space and only raised to α on the way into the tree.

    Sampling is stratified (Appendix B.2.1): [0, total) is cut into k = batch_size equal
    slices and one uniform target is drawn in each, so draw j comes from slice j. The
    returned probability is P(i) = leaf / total: a single draw is confined to its slice, but
    over the k draws of a batch each slot is drawn P(i) · k times in expectation, which is
    what the importance weights correct for.

    Invariants: `_raw[s] > 0` exactly for the sampleable slots (0 for slots never added or
    removed, whose tree leaves are 0 too); the tree's leaf s is `_raw[s] ** α`; `_size` counts
    the sampleable slots. No draw lands on a zero leaf, whatever the rounding (see
    `replay.sum_tree.descend`), so weights are always finite.
    """

    settings = ProportionalReplaySettings

    @classmethod
    def from_settings(cls, settings: ProportionalReplaySettings, rng: np.random.Generator):
        return cls(settings.capacity, rng, priority_exponent=settings.priority_exponent)

    def __init__(
        self,
        capacity: int,
        rng: np.random.Generator,
        *,
        priority_exponent: float = ProportionalReplaySettings.priority_exponent,
    ):
        self._rng = rng
        self._tree = SumTree(capacity)
        self._raw = np.zeros(capacity, dtype=np.float64)
        self._size = 0
        self._max_priority = 1.0
        self.priority_exponent = float(priority_exponent)

    def add(self, index: int) -> None:
        """Makes a slot sampleable as a new transition with the maximal raw priority."""
        if self._member(index):
            raise ValueError(f"slot {index} is already sampleable")
        self._raw[index] = self._max_priority
        self._tree.set(np.array([index]), np.array([self._max_priority**self.priority_exponent]))
        self._size += 1

    def remove(self, index: int) -> None:
        if not self._member(index):
            raise ValueError(f"slot {index} is not sampleable")
        self._raw[index] = 0.0
        self._tree.set(np.array([index]), np.zeros(1))
        self._size -= 1

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, P(slot)) for `batch_size` stratified draws, with replacement."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        return self._tree.sample(self._rng.random(batch_size))

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the raw priorities (positive, finite) of sampleable slots; a repeated slot keeps
        its last one."""
        indices = np.ascontiguousarray(indices, dtype=np.int64).reshape(-1)
        priorities = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
        if indices.shape != priorities.shape:
            raise ValueError(f"{indices.size} indices but {priorities.size} priorities")
        tree = self._tree
        status, largest = _store_priorities(
            self._raw,
            tree.leaves,
            tree.block_sums,
            tree.stale_blocks,
            indices,
            priorities,
            self.priority_exponent,
        )
        raise_for_status(status)
        self._max_priority = max(self._max_priority, largest)

    def min_probability(self) -> float:
        """The smallest P(i) over sampleable slots, exact (from the min tree)."""
        if self._size == 0:
            raise ValueError("an empty replay has no probabilities")
        return self._tree.min_positive / self._tree.total

    def priorities(self) -> np.ndarray:
        """Raw priorities (before α) of the sampleable slots, in slot order."""
        return self._raw[self._raw > 0.0]

    def probabilities(self, batch_size: int) -> np.ndarray:
        """P(i) = leaf_i / total for every slot (0 where not sampleable), whatever the batch
        size: draw j lands on i with probability (the part of i's interval in slice j) ·
        k / total, whose mean over the k slices is leaf_i / total."""
        if self._size == 0:
            raise ValueError("an empty replay has no probabilities")
        return self._tree.values() / self._tree.total

    @property
    def max_priority(self) -> float:
        """Largest raw priority ever written (1 before any update), never raised to α."""
        return self._max_priority

    def __len__(self) -> int:
        return self._size

    def set_priority_exponent(self, priority_exponent: float) -> None:
        """Changes α; rebuilds every leaf from the stored raw priorities (O(N), vectorized)."""
        self.priority_exponent = float(priority_exponent)
        sampleable = self._raw > 0.0
        leaves = np.zeros_like(self._raw)
        leaves[sampleable] = self._raw[sampleable] ** self.priority_exponent
        self._tree.rebuild(leaves)

    def state_dict(self) -> dict:
        """Everything needed to continue exactly, except the rng (the caller saves that)."""
        return {
            "capacity": self._tree.capacity,
            "priority_exponent": self.priority_exponent,
            "raw_priorities": self._raw.copy(),
            **{f"tree_{name}": array for name, array in self._tree.state_dict().items()},
            "max_priority": self._max_priority,
            "size": self._size,
        }

    def load_state_dict(self, state: dict) -> None:
        if int(state["capacity"]) != self._tree.capacity:
            raise ValueError(
                f"state has capacity {state['capacity']}, sampler has {self._tree.capacity}"
            )
        self.priority_exponent = float(state["priority_exponent"])
        self._raw[:] = state["raw_priorities"]
        self._tree.load_state_dict(
            {name: state[f"tree_{name}"] for name in ("leaves", "block_sums", "block_mins")}
        )
        self._max_priority = float(state["max_priority"])
        self._size = int(state["size"])

    def _member(self, index: int) -> bool:
        if not 0 <= index < self._raw.shape[0]:
            raise IndexError(f"slot {index} is outside [0, {self._raw.shape[0]})")
        return bool(self._raw[index] > 0.0)
