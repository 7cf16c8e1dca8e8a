"""The sum tree and the proportional sampler: exact sums, guards, fit, state."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from replay.priority_signals import td_error_priorities
from replay.proportional import ProportionalSampler
from replay.sum_tree import SumTree


class FixedUniforms:
    def __init__(self, value):
        self.value = value

    def random(self, size):
        return np.full(size, self.value)


def assert_tree_consistent(tree: SumTree):
    """Every node is exactly its children's sum / min (no drift, no stale parent)."""
    tree.min_positive  # noqa: B018 -- minima are refreshed when first asked for
    sums, mins, count = tree.block_sums, tree.block_mins, tree.block_count
    blocks = tree.leaves.reshape(count, -1)
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
    sampler.update(np.arange(len(td_errors)), td_error_priorities(np.asarray(td_errors), 0.01))
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
    assert_tree_consistent(tree)


def test_duplicate_indices_in_one_update_keep_the_last_and_the_tree_consistent():
    sampler = filled(8, np.zeros(8), priority_exponent=1.0)
    sampler.update(np.array([3, 3, 5, 3]), np.array([0.11, 0.21, 0.31, 0.41]))
    raw = sampler.state_dict()["raw_priorities"]
    np.testing.assert_allclose(raw[[3, 5]], [0.41, 0.31])
    assert_tree_consistent(sampler._tree)
    assert sampler._tree.total == pytest.approx(math.fsum(6 * [0.01] + [0.41, 0.31]), rel=1e-15)


@pytest.mark.parametrize("capacity", [1, 3, 1000, 1025])
def test_any_capacity_samples_exactly_its_slots(capacity):
    rng = np.random.default_rng(capacity)
    sampler = filled(capacity, rng.normal(size=capacity))
    indices, probabilities = sampler.sample(64)
    assert ((0 <= indices) & (indices < capacity)).all()
    np.testing.assert_allclose(probabilities, sampler.probabilities_of(indices))
    assert sampler._tree.values().shape == (capacity,)
    assert (sampler._tree.leaves[capacity:] == 0).all()
    assert_tree_consistent(sampler._tree)
    drawn = np.concatenate([sampler.sample(32)[0] for _ in range(400)])
    assert capacity - 1 in drawn  # the last leaf is reachable


def test_right_edge_draws_land_on_the_last_nonempty_leaf():
    # One huge leaf absorbs 599 tiny ones in float64: mathematically the tail is there, but a
    # target computed from the rounded total can point past every leaf. Slots 600.. are empty.
    tree = SumTree(1000)
    tree.set(np.arange(600), np.r_[1e16, np.full(599, 1e-3)])
    total = tree.total
    targets = [total, np.nextafter(total, 0), np.nextafter(total, np.inf), 2 * total, 1e300]
    slots = tree.find(np.array(targets))
    assert (slots < 600).all() and (tree.values()[slots] > 0).all()


def test_boundary_targets_skip_empty_leaves_in_the_middle():
    tree = SumTree(6)
    tree.set(np.arange(6), np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0]))
    np.testing.assert_array_equal(
        tree.find(np.array([0.0, 0.999, 1.0, 1.5, 2.0, 3.0])), [0, 0, 3, 3, 3, 3]
    )


def test_boundary_targets_skip_empty_blocks_and_the_empty_tail():
    tree = SumTree(64)  # 8 blocks of 8 leaves; only slots 0 and 40 are non-empty
    tree.set(np.array([0, 40]), np.array([1.0, 1.0]))
    slots = tree.find(np.array([0.5, 1.0, 1.5, 2.0, 5.0]))
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
    assert_tree_consistent(rebuilt)
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


def test_right_edge_sampling_gives_finite_weights_when_slots_past_size_are_empty():
    sampler = ProportionalSampler(1000, FixedUniforms(np.nextafter(1.0, 0.0)))
    for slot in range(600):
        sampler.add(slot)
    sampler.update(np.arange(600), np.r_[np.full(5, 1.01), np.full(595, 0.01)])
    indices, probabilities = sampler.sample(32)
    assert (indices < 600).all() and (probabilities > 0).all()
    assert indices[-1] == 599  # the last stratum's right edge is the last sampleable slot


SHAPES = {
    "uniform-ish": lambda rng: rng.uniform(0.4, 0.6, size=60),
    "pareto": lambda rng: rng.pareto(1.2, size=60) * 0.05,
    "with epsilon-only": lambda rng: np.r_[np.zeros(20), rng.uniform(0, 2, size=40)],
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_draw_frequencies_fit_the_stated_probabilities(shape):
    rng = np.random.default_rng(11)
    sampler = filled(60, SHAPES[shape](rng), seed=12)
    draws = np.concatenate([sampler.sample(32)[0] for _ in range(3000)])
    expected = sampler.probabilities_of(np.arange(60)) * draws.size
    assert expected.min() > 5
    assert chisquare(np.bincount(draws, minlength=60), expected).pvalue > 0.001


def test_changing_alpha_rebuilds_leaves_from_raw_priorities():
    sampler = filled(4, [0.0, 0.99, 0.49, 0.0], priority_exponent=1.0)
    sampler.remove(3)
    sampler.set_priority_exponent(0.5)
    # raw (0.01, 1.0, 0.5) → leaves (0.1, 1, √0.5); slot 3 stays empty
    leaves = np.array([0.1, 1.0, math.sqrt(0.5)])
    expected = np.r_[leaves / leaves.sum(), 0.0]
    np.testing.assert_allclose(sampler.probabilities_of(np.arange(4)), expected)
    assert sampler.max_priority == 1.0
    assert sampler.min_probability() == pytest.approx(0.1 / leaves.sum())
    assert_tree_consistent(sampler._tree)


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
        assert sampler._tree.total == pytest.approx(total, rel=1e-12)
        expected = np.array([leaves.get(s, 0.0) / total for s in range(21)])
        np.testing.assert_allclose(sampler.probabilities_of(np.arange(21)), expected, rtol=1e-12)
        assert sampler.min_probability() == pytest.approx(min(leaves.values()) / total, rel=1e-12)
        np.testing.assert_allclose(np.sort(sampler.priorities()), sorted(model.values()))
