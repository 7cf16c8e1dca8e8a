"""Compiled kernels of an array binary max-heap with a slot → position map.

Invariant kept by every kernel: for `size` entries, `keys[parent] >= keys[child]`,
`slots[position]` is the storage slot at a heap position and `positions[slot]` its inverse
(−1 for a slot not in the heap). Kernels return the status codes of `replay.sum_tree`.
"""

import numpy as np
from numba import njit

from replay.sum_tree import OK, SLOT_NOT_SAMPLEABLE, SLOT_OUT_OF_RANGE, VALUE_INVALID


@njit(cache=True)
def sift_up(keys, slots, positions, position, rise_on_ties):
    """Moves the entry at `position` up while its parent is smaller (or equal, on request)."""
    key, slot = keys[position], slots[position]
    while position > 0:
        parent = (position - 1) >> 1
        if keys[parent] > key or (keys[parent] == key and not rise_on_ties):
            break
        keys[position], slots[position] = keys[parent], slots[parent]
        positions[slots[position]] = position
        position = parent
    keys[position], slots[position] = key, slot
    positions[slot] = position


@njit(cache=True)
def sift_down(keys, slots, positions, position, size):
    """Moves the entry at `position` down while a child is larger."""
    key, slot = keys[position], slots[position]
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] > keys[child]:
            child += 1
        if keys[child] <= key:
            break
        keys[position], slots[position] = keys[child], slots[child]
        positions[slots[position]] = position
        position = child
    keys[position], slots[position] = key, slot
    positions[slot] = position


@njit(cache=True)
def heap_insert(keys, slots, positions, size, slot, key):
    """Appends at position `size`; ties rise, so a new max-priority entry becomes rank 1."""
    keys[size], slots[size] = key, slot
    sift_up(keys, slots, positions, size, True)


@njit(cache=True)
def heap_remove(keys, slots, positions, size, slot):
    """Swaps the last entry into the removed one's place and restores the heap."""
    position, last = positions[slot], size - 1
    positions[slot] = -1
    if position != last:
        moved = slots[last]
        keys[position], slots[position] = keys[last], moved
        positions[moved] = position
        sift_up(keys, slots, positions, position, False)
        sift_down(keys, slots, positions, positions[moved], last)


@njit(cache=True)
def heap_update(keys, slots, positions, size, indices, priorities):
    """Re-keys sampleable slots in order (last write wins). Checks everything before
    writing; returns (status, largest priority of the batch)."""
    largest = 0.0
    for i in range(indices.shape[0]):
        if indices[i] < 0 or indices[i] >= positions.shape[0]:
            return SLOT_OUT_OF_RANGE, largest
        if positions[indices[i]] < 0:
            return SLOT_NOT_SAMPLEABLE, largest
        if not (priorities[i] >= 0.0 and priorities[i] < np.inf):  # rejects NaN too
            return VALUE_INVALID, largest
        largest = max(largest, priorities[i])
    for i in range(indices.shape[0]):
        position = positions[indices[i]]
        old, keys[position] = keys[position], priorities[i]
        if priorities[i] > old:
            sift_up(keys, slots, positions, position, False)
        elif priorities[i] < old:
            sift_down(keys, slots, positions, position, size)
    return OK, largest
