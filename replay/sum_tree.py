"""A sum tree with exact minimum tracking, the data structure behind proportional replay.

Schaul et al. (2016), Appendix B.2.1: "every node is the sum of its children, with the
priorities as the leaf nodes", which gives O(log N) updates and O(log N) draws from the
distribution P(i) = leaf_i / total.
"""

import numpy as np
from numba import njit

# Status codes returned by the compiled kernels of the replay samplers; `raise_for_status`
# turns them into exceptions (numba kernels report errors by value to stay cheap).
OK = 0
SLOT_OUT_OF_RANGE = 1
VALUE_INVALID = 2
SLOT_NOT_SAMPLEABLE = 3

# Leaves per block: 8 float64 are one 64-byte cache line, so a block costs one memory access.
BLOCK = 8
# How many written blocks are remembered for the lazy refresh of the minima; past that, the
# next query rebuilds every minimum (O(N), vectorized).
STALE_CAPACITY = 4096


@njit(cache=True)
def write_leaves(leaves, block_sums, stale_blocks, capacity, slots, values):
    """Writes values[i] to leaf slots[i] in order (a repeated slot keeps its last value), then
    recomputes each touched block's sum and every ancestor from its children, level by
    level, and records the blocks whose minimum is now stale (see `refresh_minima`).

    Recomputing (instead of adding the change to each ancestor) keeps every node exactly the
    float sum of its children, so rounding never accumulates over updates. Moving a batch up
    one level at a time lets its independent cache-missing loads overlap; a parent shared by
    several slots is simply recomputed again from the same final children. Everything is
    checked before anything is written.
    """
    count, block_count = slots.shape[0], block_sums.shape[0] >> 1
    for i in range(count):
        if slots[i] < 0 or slots[i] >= capacity:
            return SLOT_OUT_OF_RANGE
        if not (values[i] >= 0.0 and values[i] < np.inf):
            return VALUE_INVALID
    for i in range(count):
        leaves[slots[i]] = values[i]
    path = np.empty(count, dtype=np.int64)
    for i in range(count):
        block = slots[i] // BLOCK
        total = 0.0
        for leaf in range(block * BLOCK, block * BLOCK + BLOCK):
            total += leaves[leaf]  # a left-to-right fold: the order `descend` scans in
        block_sums[block_count + block] = total
        path[i] = (block_count + block) >> 1
    level_size = block_count >> 1  # all blocks share one depth, so the paths move up in step
    while level_size >= 1:
        for i in range(count):
            node, left = path[i], path[i] << 1
            block_sums[node] = block_sums[left] + block_sums[left + 1]
            path[i] = node >> 1
        level_size >>= 1
    _record_stale(stale_blocks, slots)
    return OK


@njit(cache=True)
def _record_stale(stale_blocks, slots):
    """stale_blocks[0] counts the blocks listed in stale_blocks[1:], or is −1 once they no
    longer fit (then every minimum is rebuilt on the next query)."""
    listed = stale_blocks[0]
    if listed < 0:
        return
    if listed + slots.shape[0] > stale_blocks.shape[0] - 1:
        stale_blocks[0] = -1
        return
    for i in range(slots.shape[0]):
        stale_blocks[1 + listed + i] = slots[i] // BLOCK
    stale_blocks[0] = listed + slots.shape[0]


@njit(cache=True)
def refresh_minima(leaves, block_mins, stale_blocks):
    """Recomputes the listed blocks' minima (smallest positive leaf, +inf if none) and their
    ancestors (the min of their children), level by level; empties the list."""
    count, block_count = stale_blocks[0], block_mins.shape[0] >> 1
    path = np.empty(count, dtype=np.int64)
    for i in range(count):
        block = stale_blocks[1 + i]
        smallest = np.inf
        for leaf in range(block * BLOCK, block * BLOCK + BLOCK):
            if leaves[leaf] > 0.0 and leaves[leaf] < smallest:
                smallest = leaves[leaf]
        block_mins[block_count + block] = smallest
        path[i] = (block_count + block) >> 1
    level_size = block_count >> 1
    while level_size >= 1:
        for i in range(count):
            node, left = path[i], path[i] << 1
            block_mins[node] = min(block_mins[left], block_mins[left + 1])
            path[i] = node >> 1
        level_size >>= 1
    stale_blocks[0] = 0


@njit(cache=True)
def descend(leaves, block_sums, targets, slots_out):
    """slots_out[j] = the slot whose cumulative interval [prefix, prefix + leaf) holds
    targets[j] (a prefix-sum search; `targets` is consumed as scratch).

    All searches advance one level together, so their cache-missing loads overlap; the last
    step scans the 8 leaves of a block, one cache line.
    Guard: a branch is entered only if its sum is positive, and within a block the leaf taken
    is the first whose inclusive prefix exceeds the target (so it is positive), or the last
    positive one when rounding put the target at or past the block's sum. Every draw
    therefore ends on a positive leaf: a target at or past the total lands on the last
    non-empty leaf, never on an empty one past it.
    """
    count, block_count = targets.shape[0], block_sums.shape[0] >> 1
    for j in range(count):
        slots_out[j] = 1  # node ids during the walk down the block tree
    level_size = 1
    while level_size < block_count:
        for j in range(count):
            left = slots_out[j] << 1
            left_sum = block_sums[left]
            go_right = (targets[j] >= left_sum) & (block_sums[left + 1] > 0.0)
            targets[j] -= left_sum if go_right else 0.0
            slots_out[j] = left + go_right
        level_size <<= 1
    for j in range(count):
        first = (slots_out[j] - block_count) * BLOCK
        prefix, below = 0.0, 0
        for leaf in range(first, first + BLOCK):
            prefix += leaves[leaf]
            below += prefix <= targets[j]
        if below == BLOCK:  # rounding: the target is not below the block's sum
            below -= 1
            while leaves[first + below] <= 0.0:
                below -= 1
        slots_out[j] = first + below


@njit(cache=True)
def sample_stratified(leaves, block_sums, uniforms, slots_out, probabilities_out):
    """Draw j uses target (j + uniforms[j]) · total / k, i.e. one uniform draw in slice j of
    [0, total) split into k = len(uniforms) equal slices (Appendix B.2.1)."""
    total, k = block_sums[1], uniforms.shape[0]
    targets = np.empty(k, dtype=np.float64)
    for j in range(k):
        targets[j] = (j + uniforms[j]) * (total / k)
    descend(leaves, block_sums, targets, slots_out)
    for j in range(k):
        probabilities_out[j] = leaves[slots_out[j]] / total


def _aligned_zeros(count: int) -> np.ndarray:
    """Zeros starting on a 64-byte boundary, so each block of leaves is one cache line."""
    buffer = np.zeros(count + BLOCK, dtype=np.float64)
    skip = (-buffer.ctypes.data % 64) // buffer.itemsize
    return buffer[skip : skip + count]


class SumTree:
    """Sums and minima over `capacity` non-negative, finite leaf values (float64).

    Layout: `leaves` is a flat array in slot order, padded to whole blocks of 8 (one cache
    line each). Over the blocks sit two complete binary trees in flat arrays, 1-based like
    a binary heap (node n has children 2n and 2n + 1, root 1, block b at `block_count + b`,
    index 0 unused): `block_sums` and `block_mins`. The block count is padded to a power of
    two, so every block has the same depth; padding leaves are 0 forever.

    Invariants:
    - each block sum is the left-to-right float fold of its 8 leaves, and each internal node
      the float sum of its two children, recomputed from them on every write: `total` is
      exact to about (depth + 8) · 2^-53 relative, and never drifts;
    - each min node is the smallest positive leaf below it (+inf if none), except under the
      blocks listed in `stale_blocks`: minima are refreshed lazily, when `min_positive` is
      read, so a sampling loop that never asks (minibatch weight normalization, the paper's)
      never pays for them;
    - a zero leaf is empty: no prefix search or draw ever returns it.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.block_count = 1 << max(0, (-(-capacity // BLOCK) - 1).bit_length())
        self.leaves = _aligned_zeros(self.block_count * BLOCK)
        self.block_sums = np.zeros(2 * self.block_count, dtype=np.float64)
        self.block_mins = np.full(2 * self.block_count, np.inf, dtype=np.float64)
        self.stale_blocks = np.zeros(1 + STALE_CAPACITY, dtype=np.int64)

    @property
    def total(self) -> float:
        return float(self.block_sums[1])

    @property
    def min_positive(self) -> float:
        """The smallest positive leaf, +inf when every leaf is zero (exact)."""
        if self.stale_blocks[0] < 0:
            self._rebuild_minima()
        elif self.stale_blocks[0] > 0:
            refresh_minima(self.leaves, self.block_mins, self.stale_blocks)
        return float(self.block_mins[1])

    def values(self) -> np.ndarray:
        """The `capacity` leaf values in slot order (a copy)."""
        return self.leaves[: self.capacity].copy()

    def set(self, slots: np.ndarray, values: np.ndarray) -> None:
        """Sets leaf slots[i] to values[i]; with repeated slots the last value wins."""
        slots = np.ascontiguousarray(slots, dtype=np.int64).reshape(-1)
        values = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        if slots.shape != values.shape:
            raise ValueError(f"{slots.size} slots but {values.size} values")
        raise_for_status(
            write_leaves(
                self.leaves, self.block_sums, self.stale_blocks, self.capacity, slots, values
            )
        )

    def sample(self, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stratified draws, one per uniform in [0, 1): (slots, leaf / total)."""
        self._require_nonempty()
        slots = np.empty(uniforms.shape[0], dtype=np.int64)
        probabilities = np.empty(uniforms.shape[0], dtype=np.float64)
        sample_stratified(self.leaves, self.block_sums, uniforms, slots, probabilities)
        return slots, probabilities

    def rebuild(self, values: np.ndarray) -> None:
        """Replaces all `capacity` leaves at once and recomputes every node, O(N) vectorized,
        with the same fold order as `write_leaves` (so the result is bit-identical)."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(f"expected {self.capacity} leaf values, got {values.shape}")
        if not np.all((values >= 0.0) & (values < np.inf)):
            raise ValueError("leaf values must be finite and non-negative")
        self.leaves[: self.capacity] = values
        sums, count = self.block_sums, self.block_count
        sums[count:] = 0.0
        for column in self.leaves.reshape(count, BLOCK).T:  # a left-to-right fold
            sums[count:] += column
        _combine_levels(sums, np.add)
        self._rebuild_minima()

    def state_dict(self) -> dict:
        self.min_positive  # noqa: B018 -- refreshes stale minima, so the saved state is whole
        return {
            "leaves": self.leaves.copy(),
            "block_sums": self.block_sums.copy(),
            "block_mins": self.block_mins.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        for name in ("leaves", "block_sums", "block_mins"):
            array = getattr(self, name)
            if state[name].shape != array.shape:
                raise ValueError(f"sum tree state {name!r} has a different size")
            array[:] = state[name]  # in place: keeps the 64-byte alignment
        self.stale_blocks[0] = 0

    def _rebuild_minima(self) -> None:
        blocks = self.leaves.reshape(self.block_count, BLOCK)
        self.block_mins[self.block_count :] = np.where(blocks > 0.0, blocks, np.inf).min(axis=1)
        _combine_levels(self.block_mins, np.minimum)
        self.stale_blocks[0] = 0

    def _require_nonempty(self) -> None:
        if not self.block_sums[1] > 0.0:
            raise ValueError("cannot draw from an empty sum tree")


def _combine_levels(tree: np.ndarray, combine: np.ufunc) -> None:
    """Fills every internal node of a 1-based binary tree from its two children, bottom up:
    the parents of nodes [count, 2·count) are [count/2, count)."""
    count = tree.shape[0] >> 1
    while count > 1:
        combine(
            tree[count : 2 * count : 2],
            tree[count + 1 : 2 * count : 2],
            out=tree[count >> 1 : count],
        )
        count >>= 1


def raise_for_status(status: int) -> None:
    if status == SLOT_OUT_OF_RANGE:
        raise IndexError("slot out of range")
    if status == VALUE_INVALID:
        raise ValueError("values must be finite (and priorities positive)")
    if status == SLOT_NOT_SAMPLEABLE:
        raise ValueError("slot is not sampleable (a stale index?)")
    if status != OK:
        raise RuntimeError(f"unknown kernel status {status}")
