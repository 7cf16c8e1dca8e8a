"""The sum tree and the proportional sampler: exact sums, guards, α, strata, state."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.priority_signals import td_error_priorities
from replay.proportional import ProportionalSampler
from replay.sum_tree import SumTree, descend


class FixedUniforms:
    """Stands in for np.random.Generator where a test needs chosen uniforms: the values
    given, repeated to the size asked for."""

    def __init__(self, *values):
        self.values = np.array(values, dtype=np.float64)

    def random(self, size):
        return np.resize(self.values, size)


def tree_state(sampler: ProportionalSampler) -> dict:
    """The sampler's sum tree as its `state_dict` saves it."""
    state = sampler.state_dict()
    return {name: state[f"tree_{name}"] for name in ("leaves", "block_sums", "block_mins")}


def assert_tree_consistent(state: dict):
    """Every node of a sum tree's `state_dict` (whose minima are refreshed) is exactly its
    children's sum / min (no drift, no stale parent)."""
    sums, mins = state["block_sums"], state["block_mins"]
    count = sums.shape[0] // 2
    blocks = state["leaves"].reshape(count, -1)
    folded = np.zeros(count)
    for column in blocks.T:  # the left-to-right fold the tree promises
        folded += column
    np.testing.assert_array_equal(sums[count:], folded)
    np.testing.assert_array_equal(mins[count:], np.where(blocks > 0, blocks, np.inf).min(axis=1))
    internal = np.arange(1, count)
    np.testing.assert_array_equal(sums[internal], sums[2 * internal] + sums[2 * internal + 1])
    lowest = np.minimum(mins[2 * internal], mins[2 * internal + 1])
    np.testing.assert_array_equal(mins[internal], lowest)


def filled(capacity, td_errors, seed=0, **options):
    """Slots 0.. with the paper's priorities min(|δ|, 1) + 0.01 of `td_errors`."""
    sampler = ProportionalSampler(capacity, np.random.default_rng(seed), **options)
    for slot in range(len(td_errors)):
        sampler.add(slot)
    sampler.update(np.arange(len(td_errors)), td_error_priorities(np.asarray(td_errors), 0.01, 1.0))
    return sampler


def test_root_stays_exact_over_ten_million_batched_updates():
    rng = np.random.default_rng(0)
    tree, batch, batches = SumTree(100_003), 50_000, 200  # 10^7 leaf writes
    for _ in range(batches):
        slots = rng.integers(0, tree.capacity, size=batch)
        tree.set(slots, 10.0 ** rng.uniform(-6, 3, size=batch))  # nine decades of magnitude
    exact = math.fsum(tree.values())
    assert abs(tree.total - exact) / exact < 1e-9
    assert abs(tree.total - exact) / exact < 1e-13  # in fact: a few ulps, no drift at all
    assert_tree_consistent(tree.state_dict())


def test_duplicate_indices_in_one_update_keep_the_last_and_the_tree_consistent():
    sampler = filled(8, np.zeros(8), priority_exponent=1.0)
    sampler.update(np.array([3, 3, 5, 3]), np.array([0.11, 0.21, 0.31, 0.41]))
    raw = sampler.state_dict()["raw_priorities"]
    np.testing.assert_allclose(raw[[3, 5]], [0.41, 0.31])
    tree = tree_state(sampler)
    assert_tree_consistent(tree)
    assert tree["block_sums"][1] == pytest.approx(math.fsum(6 * [0.01] + [0.41, 0.31]), rel=1e-15)


@pytest.mark.parametrize("capacity", [1, 3, 1000, 1025])
def test_any_capacity_samples_exactly_its_slots(capacity):
    rng = np.random.default_rng(capacity)
    sampler = filled(capacity, rng.normal(size=capacity))
    indices, probabilities = sampler.sample(64)
    assert ((0 <= indices) & (indices < capacity)).all()
    np.testing.assert_array_equal(probabilities, sampler.probabilities(64)[indices])
    assert sampler.probabilities(64).shape == (capacity,)
    tree = tree_state(sampler)
    assert (tree["leaves"][capacity:] == 0).all()
    assert_tree_consistent(tree)
    drawn = np.concatenate([sampler.sample(32)[0] for _ in range(400)])
    assert capacity - 1 in drawn  # the last leaf is reachable


def prefix_search(tree: SumTree, targets) -> np.ndarray:
    """The slots `descend`, the search behind every draw, finds for chosen targets (at or past
    the total too, where rounding can put a draw's target)."""
    targets = np.array(targets, dtype=np.float64)
    slots = np.empty(targets.shape[0], dtype=np.int64)
    descend(tree.leaves, tree.block_sums, targets, slots)
    return slots


def test_right_edge_draws_land_on_the_last_nonempty_leaf():
    # One huge leaf absorbs 599 tiny ones in float64: mathematically the tail is there, but a
    # target computed from the rounded total can point past every leaf. Slots 600.. are empty.
    tree = SumTree(1000)
    tree.set(np.arange(600), np.r_[1e16, np.full(599, 1e-3)])
    total = tree.total
    targets = [total, np.nextafter(total, 0), np.nextafter(total, np.inf), 2 * total, 1e300]
    slots = prefix_search(tree, targets)
    assert (slots < 600).all() and (tree.values()[slots] > 0).all()


def test_boundary_targets_skip_empty_leaves_in_the_middle():
    tree = SumTree(6)
    tree.set(np.arange(6), np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0]))
    np.testing.assert_array_equal(
        prefix_search(tree, [0.0, 0.999, 1.0, 1.5, 2.0, 3.0]), [0, 0, 3, 3, 3, 3]
    )


def test_boundary_targets_skip_empty_blocks_and_the_empty_tail():
    tree = SumTree(64)  # 8 blocks of 8 leaves; only slots 0 and 40 are non-empty
    tree.set(np.array([0, 40]), np.array([1.0, 1.0]))
    slots = prefix_search(tree, [0.5, 1.0, 1.5, 2.0, 5.0])
    np.testing.assert_array_equal(slots, [0, 40, 40, 40, 40])


def test_rebuild_is_bit_identical_to_incremental_writes():
    rng = np.random.default_rng(6)
    values = np.where(rng.random(1001) < 0.3, 0.0, 10.0 ** rng.uniform(-5, 5, size=1001))
    incremental, rebuilt = SumTree(1001), SumTree(1001)
    incremental.set(rng.permutation(1001), np.zeros(1001))
    order = rng.permutation(1001)
    incremental.set(order, values[order])
    rebuilt.rebuild(values)
    for name, array in incremental.state_dict().items():
        np.testing.assert_array_equal(array, rebuilt.state_dict()[name])
    assert_tree_consistent(rebuilt.state_dict())
    assert rebuilt.min_positive == values[values > 0].min()


def test_lazy_minimum_is_exact_after_few_and_after_overflowing_many_writes():
    rng = np.random.default_rng(8)
    tree = SumTree(50_000)
    values = rng.uniform(1, 2, size=50_000)
    tree.set(np.arange(50_000), values)  # more writes than the stale list holds: a rebuild
    assert tree.min_positive == values.min()
    for _ in range(20):  # a few writes between queries: the listed blocks are refreshed
        slots = rng.integers(0, 50_000, size=32)
        values[slots] = np.where(rng.random(32) < 0.2, 0.0, rng.uniform(0.5, 2, size=32))
        tree.set(slots, values[slots])
        assert tree.min_positive == values[values > 0].min()
    tree.set(np.arange(50_000), np.zeros(50_000))
    assert tree.min_positive == np.inf


def test_alpha_is_applied_once_to_the_raw_max_priority_of_a_new_slot():
    sampler = ProportionalSampler(8, np.random.default_rng(0), priority_exponent=0.5)
    sampler.add(0)
    sampler.add(1)
    sampler.update(np.array([0]), np.array([4.0]))
    sampler.add(2)
    assert sampler.max_priority == 4.0  # raw, not 4^½ = 2
    # leaves (4^½, 1^½, 4^½) = (2, 1, 2) over 5; α applied twice would give 4^¼ = √2.
    np.testing.assert_allclose(sampler.probabilities(3)[:3], [0.4, 0.2, 0.4])


def test_draw_j_lies_in_slice_j_by_hand():
    # α = 1: priorities (1, 1, 2, 2) are the leaves, total 6, cumulative intervals
    # [0,1) [1,2) [2,4) [4,6); two slices [0,3) and [3,6).
    def sampler_drawing(*uniforms):
        sampler = ProportionalSampler(4, FixedUniforms(*uniforms), priority_exponent=1.0)
        for slot in range(4):
            sampler.add(slot)
        sampler.update(np.arange(4), np.array([1.0, 1.0, 2.0, 2.0]))
        return sampler

    indices, probabilities = sampler_drawing(0.5, 0.0).sample(2)  # targets 1.5 and 3.0
    np.testing.assert_array_equal(indices, [1, 2])
    np.testing.assert_allclose(probabilities, [1 / 6, 2 / 6])
    edges = sampler_drawing(0.0, np.nextafter(1.0, 0.0))  # targets 0 and just below 6
    np.testing.assert_array_equal(edges.sample(2)[0], [0, 3])


def test_draws_are_stratified_over_the_cumulative_total():
    rng = np.random.default_rng(3)
    sampler = ProportionalSampler(200, rng)
    for slot in range(200):
        sampler.add(slot)
    sampler.update(np.arange(200), rng.pareto(1.5, size=200) * 0.05 + 0.01)
    shares = sampler.probabilities(16)  # each slot's share of the cumulative total
    interval_ends = np.cumsum(shares)
    for _ in range(200):
        indices, _ = sampler.sample(16)
        ends, starts = interval_ends[indices], interval_ends[indices] - shares[indices]
        slices = np.arange(16) / 16
        assert ((starts <= slices + 1 / 16 + 1e-12) & (ends >= slices - 1e-12)).all()


def test_right_edge_sampling_gives_finite_weights_when_slots_past_size_are_empty():
    sampler = ProportionalSampler(1000, FixedUniforms(np.nextafter(1.0, 0.0)))
    for slot in range(600):
        sampler.add(slot)
    sampler.update(np.arange(600), np.r_[np.full(5, 1.01), np.full(595, 0.01)])
    indices, probabilities = sampler.sample(32)
    assert (indices < 600).all() and (probabilities > 0).all()
    assert indices[-1] == 599  # the last stratum's right edge is the last sampleable slot


def test_changing_alpha_rebuilds_leaves_from_raw_priorities():
    sampler = filled(4, [0.0, 0.99, 0.49, 0.0], priority_exponent=1.0)
    sampler.remove(3)
    sampler.set_priority_exponent(0.5)
    # raw (0.01, 1.0, 0.5) → leaves (0.1, 1, √0.5); slot 3 stays empty
    leaves = np.array([0.1, 1.0, math.sqrt(0.5)])
    expected = np.r_[leaves / leaves.sum(), 0.0]
    np.testing.assert_allclose(sampler.probabilities(1), expected)
    assert sampler.max_priority == 1.0
    assert sampler.min_probability() == pytest.approx(0.1 / leaves.sum())
    assert_tree_consistent(tree_state(sampler))


def test_stale_or_bad_updates_are_refused_without_writing():
    sampler = filled(5, np.zeros(3))
    before = sampler.state_dict()
    with pytest.raises(ValueError):
        sampler.update(np.array([0, 4]), np.array([1.0, 1.0]))  # slot 4 was never added
    with pytest.raises(IndexError):
        sampler.update(np.array([0, -1]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError):
        sampler.update(np.array([0, 1]), np.array([1.0, np.nan]))
    with pytest.raises(ValueError):
        sampler.update(np.array([0, 1]), np.array([1.0, 0.0]))  # a zero leaf is an empty slot
    for name, array in sampler.state_dict().items():
        np.testing.assert_array_equal(array, before[name])


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "update", "alpha"]),
        st.integers(0, 20),
        st.floats(0.01, 3, allow_nan=False),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS)
def test_matches_a_naive_model(operations):
    sampler = ProportionalSampler(21, np.random.default_rng(0), priority_exponent=0.6)
    model, max_priority, alpha = {}, 1.0, 0.6
    for name, slot, value in operations:
        if name == "add" and slot not in model:
            sampler.add(slot)
            model[slot] = max_priority
        elif name == "remove" and slot in model:
            sampler.remove(slot)
            del model[slot]
        elif name == "update" and slot in model:
            sampler.update(np.array([slot]), np.array([value]))
            model[slot] = value
            max_priority = max(max_priority, model[slot])
        elif name == "alpha":
            alpha = value / 3
            sampler.set_priority_exponent(alpha)
        assert len(sampler) == len(model) and sampler.max_priority == max_priority
        if not model:
            continue
        leaves = {s: p**alpha for s, p in model.items()}
        total = math.fsum(leaves.values())
        expected = np.array([leaves.get(s, 0.0) / total for s in range(21)])
        np.testing.assert_allclose(sampler.probabilities(32), expected, rtol=1e-12)
        assert sampler.min_probability() == pytest.approx(min(leaves.values()) / total, rel=1e-12)
        np.testing.assert_allclose(np.sort(sampler.priorities()), sorted(model.values()))
