"""MinPriorityTree: the lowest priority, ties to the oldest, against hand-built cases and a
naive model."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.min_tree import MinPriorityTree


def test_lowest_priority_then_oldest_by_hand():
    tree = MinPriorityTree(5)
    for slot in (3, 0, 4, 1):  # entered in this order, all at the max priority 1
        tree.enter(slot)
    assert tree.lowest() == 3  # all tie: the oldest
    tree.update(np.array([3, 0, 4, 1]), np.array([0.5, 0.25, 0.75, 0.25]))
    assert tree.lowest() == 0  # 0 and 1 tie at 0.25; 0 entered first
    tree.leave(0)
    assert tree.lowest() == 1
    tree.update(np.array([1]), np.array([2.0]))
    tree.enter(2)  # enters at the max priority ever set, 2
    assert tree.priorities[2] == 2.0 and tree.max_priority == 2.0
    assert tree.lowest() == 3
    tree.update(np.array([3, 3]), np.array([0.125, 3.0]))  # a repeated slot keeps its last
    assert tree.lowest() == 4


def test_a_slot_that_enters_again_is_the_youngest():
    tree = MinPriorityTree(3)
    for slot in range(3):
        tree.enter(slot)
    tree.leave(0)
    tree.enter(0)
    assert tree.lowest() == 1
    tree.leave(1)
    tree.leave(2)
    assert tree.lowest() == 0


def test_empty_stale_and_bad_input_are_refused_without_writing():
    tree = MinPriorityTree(4)
    with pytest.raises(ValueError, match="no slot is live"):
        tree.lowest()
    tree.enter(1)
    before = tree.state_dict()
    with pytest.raises(ValueError, match="not sampleable"):
        tree.update(np.array([1, 2]), np.array([0.5, 0.5]))  # slot 2 is not live
    with pytest.raises(IndexError):
        tree.update(np.array([1, 4]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="finite"):
        tree.update(np.array([1]), np.array([np.nan]))
    with pytest.raises(ValueError, match="finite"):
        tree.update(np.array([1]), np.array([0.0]))
    with pytest.raises(ValueError, match="already live"):
        tree.enter(1)
    with pytest.raises(ValueError, match="not live"):
        tree.leave(3)
    for name, value in tree.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["enter", "leave", "update"]),
        st.integers(0, 12),
        st.sampled_from([0.25, 0.5, 1.0, 1.5, 3.0]),  # few values: many ties
    ),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS)
def test_matches_a_naive_model(operations):
    tree = MinPriorityTree(13)
    live, entered_at, entries, max_priority = {}, {}, 0, 1.0
    for name, slot, value in operations:
        if name == "enter" and slot not in live:
            tree.enter(slot)
            live[slot], entered_at[slot], entries = max_priority, entries, entries + 1
        elif name == "leave" and slot in live:
            tree.leave(slot)
            del live[slot]
        elif name == "update" and slot in live:
            tree.update(np.array([slot]), np.array([value]))
            live[slot], max_priority = value, max(max_priority, value)
        if live:
            assert tree.lowest() == min(live, key=lambda s: (live[s], entered_at[s]))
        assert tree.max_priority == max_priority


def test_state_round_trip_continues_identically():
    original, restored = MinPriorityTree(6), MinPriorityTree(6)
    for slot in range(6):
        original.enter(slot)
    original.update(np.arange(6), np.array([0.5, 0.25, 0.25, 2.0, 1.0, 0.5]))
    restored.load_state_dict(original.state_dict())
    for tree in (original, restored):
        tree.leave(tree.lowest())
        tree.enter(1)
    assert original.lowest() == restored.lowest() == 2
    assert restored.max_priority == 2.0
