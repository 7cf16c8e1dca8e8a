"""A min tree over slots' raw priorities, the data structure behind forgetting by priority:
which stored transition has the lowest priority, ties going to the one stored first."""

import numpy as np
from numba import njit

from replay.sum_tree import (
    OK,
    SLOT_NOT_SAMPLEABLE,
    SLOT_OUT_OF_RANGE,
    VALUE_INVALID,
    raise_for_status,
)


@njit(cache=True)
def _lower(priorities, entered_at, a, b):
    """The one of slots a and b that is forgotten first: lower priority, then older."""
    if priorities[b] < priorities[a] or (
        priorities[b] == priorities[a] and entered_at[b] < entered_at[a]
    ):
        return b
    return a


@njit(cache=True)
def _refresh_paths(tree, priorities, entered_at, slots):
    """Recomputes every ancestor of the leaves of `slots` from its two children."""
    leaf_count = tree.shape[0] >> 1
    for slot in slots:
        node = (leaf_count + slot) >> 1
        while node >= 1:
            tree[node] = _lower(priorities, entered_at, tree[2 * node], tree[2 * node + 1])
            node >>= 1


@njit(cache=True)
def _set_priorities(tree, priorities, entered_at, slots, values):
    """Writes values[i] to live slots[i] in order (a repeated slot keeps its last value).
    Checks everything first; returns (status, largest value)."""
    capacity, largest = priorities.shape[0] - 1, 0.0
    for i in range(slots.shape[0]):
        if slots[i] < 0 or slots[i] >= capacity:
            return SLOT_OUT_OF_RANGE, largest
        if priorities[slots[i]] == np.inf:
            return SLOT_NOT_SAMPLEABLE, largest
        if not (values[i] > 0.0 and values[i] < np.inf):
            return VALUE_INVALID, largest
        largest = max(largest, values[i])
    for i in range(slots.shape[0]):
        priorities[slots[i]] = values[i]
    _refresh_paths(tree, priorities, entered_at, slots)
    return OK, largest


class MinPriorityTree:
    """The live slot to forget: lowest raw priority, ties to the one that entered first.

    Layout: a complete binary tree in a flat array, 1-based like a binary heap (node n has
    children 2n and 2n + 1), over a power-of-two number of leaves; leaf `leaf_count + s`
    holds slot s and every node holds the slot its subtree forgets first. Leaves past the
    capacity hold a sentinel slot `capacity` whose priority is +inf.

    Invariants: `priorities[s]` is +inf exactly for slots that are not live; `entered_at[s]`
    counts the slots that entered before s (so ties go to the oldest); `max_priority` is the
    largest priority ever set, 1 before any (what an entering slot gets, the samplers' rule).
    `enter`, `leave` and `update` of k slots cost O(k log N); `lowest` is O(1).
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        leaf_count = 1 << (capacity - 1).bit_length()
        self.priorities = np.full(capacity + 1, np.inf)
        self.entered_at = np.full(capacity + 1, np.iinfo(np.int64).max, dtype=np.int64)
        self.tree = np.full(2 * leaf_count, capacity, dtype=np.int64)
        # With no slot live, every subtree's pick may as well be the sentinel.
        self.tree[leaf_count : leaf_count + capacity] = np.arange(capacity)
        self.entered = 0
        self.max_priority = 1.0

    def enter(self, slot: int) -> None:
        """A new transition in `slot`, at the largest priority so far."""
        if self.priorities[slot] < np.inf:
            raise ValueError(f"slot {slot} is already live")
        self.priorities[slot] = self.max_priority
        self.entered_at[slot] = self.entered
        self.entered += 1
        _refresh_paths(self.tree, self.priorities, self.entered_at, np.array([slot]))

    def leave(self, slot: int) -> None:
        if self.priorities[slot] == np.inf:
            raise ValueError(f"slot {slot} is not live")
        self.priorities[slot] = np.inf
        _refresh_paths(self.tree, self.priorities, self.entered_at, np.array([slot]))

    def update(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """New raw priorities (positive, finite) for live slots."""
        slots = np.ascontiguousarray(slots, dtype=np.int64).reshape(-1)
        priorities = np.ascontiguousarray(priorities, dtype=np.float64).reshape(-1)
        if slots.shape != priorities.shape:
            raise ValueError(f"{slots.size} slots but {priorities.size} priorities")
        status, largest = _set_priorities(
            self.tree, self.priorities, self.entered_at, slots, priorities
        )
        raise_for_status(status)
        self.max_priority = max(self.max_priority, largest)

    def lowest(self) -> int:
        """The live slot with the lowest priority (the oldest of equals)."""
        slot = int(self.tree[1])
        if slot == self.capacity or self.priorities[slot] == np.inf:
            raise ValueError("no slot is live")
        return slot

    def state_dict(self) -> dict:
        return {
            "priorities": self.priorities.copy(),
            "entered_at": self.entered_at.copy(),
            "tree": self.tree.copy(),
            "entered": self.entered,
            "max_priority": self.max_priority,
        }

    def load_state_dict(self, state: dict) -> None:
        for name in ("priorities", "entered_at", "tree"):
            array = getattr(self, name)
            if state[name].shape != array.shape:
                raise ValueError(f"min tree state {name!r} has a different size")
            array[:] = state[name]
        self.entered = int(state["entered"])
        self.max_priority = float(state["max_priority"])
