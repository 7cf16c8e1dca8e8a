"""The rank-based sampler: heap, segments by hand, cache rule, approximation error, state."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.priority_signals import td_error_priorities
from replay.rank_based import RankBasedSampler
from replay.rank_segments import (
    equal_probability_segments,
    rank_cumulative_weights,
    refit_last_segment,
)


def filled(capacity, td_errors, seed=0, rng=None, **options):
    """Slots 0.. with the paper's priorities min(|δ|, 1) + 0.01 of `td_errors`."""
    rng = np.random.default_rng(seed) if rng is None else rng
    sampler = RankBasedSampler(capacity, rng, **options)
    for slot in range(len(td_errors)):
        sampler.add(slot)
    sampler.update(np.arange(len(td_errors)), td_error_priorities(np.asarray(td_errors), 0.01, 1.0))
    return sampler


def assert_heap_consistent(sampler):
    state = sampler.state_dict()
    size, keys = state["size"], state["heap_keys"]
    slots, positions = state["heap_slots"][:size], state["heap_positions"]
    children = np.arange(1, size)
    assert (keys[(children - 1) // 2] >= keys[children]).all()
    np.testing.assert_array_equal(positions[slots], np.arange(size))
    assert (positions >= 0).sum() == size


def power_law(size, exponent):
    weights = np.arange(1, size + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def segment_distribution(starts, ends, rank_probabilities, size):
    per_rank = np.zeros(size)
    for start, end, probability in zip(starts, ends, rank_probabilities, strict=True):
        per_rank[start:end] = probability
    return per_rank


def total_variation(p, q):
    return 0.5 * np.abs(p - q).sum()


def test_approximation_error_versus_the_exact_power_law_at_paper_scale():
    # The numbers quoted in docs/replay.md: N = 10^6, k = 32, α = 0.7.
    size, k = 10**6, 32
    cumulative = rank_cumulative_weights(int(1.01 * size), 0.7)
    starts, ends, probabilities = equal_probability_segments(cumulative, size, k)
    exact = power_law(size, 0.7)
    tv = total_variation(segment_distribution(starts, ends, probabilities, size), exact)
    assert tv == pytest.approx(0.0368, abs=1e-4)
    assert (starts[0], ends[0]) == (0, 30)  # segment 1 is ranks 1–30
    segment_masses = np.add.reduceat(exact, starts) * k
    assert np.abs(segment_masses - 1).max() < 0.005
    for reused_at in (int(0.99 * size), int(1.01 * size)):  # the cache tolerance's edges
        reused = (starts.copy(), ends.copy(), probabilities.copy())
        refit_last_segment(*reused, reused_at)
        per_rank = segment_distribution(*reused, reused_at)
        assert per_rank.sum() == pytest.approx(1.0, abs=1e-12)
        tv_reused = total_variation(per_rank, power_law(reused_at, 0.7))
        assert tv_reused == pytest.approx(0.0380, abs=2e-4)


def test_heap_order_error_for_random_priorities():
    # The number quoted in docs/replay.md: a heap of i.i.d. random priorities
    # (never resorted) versus the same segment distribution over true ranks.
    size = 2**14
    sampler = RankBasedSampler(size, np.random.default_rng(0), resort_period=10**9)
    for slot in range(size):
        sampler.add(slot)
    sampler.update(np.arange(size), np.random.default_rng(1).random(size))
    heap = sampler.probabilities(32)
    sampler.resort()  # heap positions become true ranks; the partition stays
    assert total_variation(heap, sampler.probabilities(32)) == pytest.approx(0.15, abs=0.02)


@pytest.mark.parametrize("size", [1, 2, 5, 31, 32, 33, 100, 4099])
@pytest.mark.parametrize("k", [1, 3, 32])
def test_segments_are_valid_for_every_size(size, k):
    cumulative = rank_cumulative_weights(size, 0.7)
    starts, ends, probabilities = equal_probability_segments(cumulative, size, k)
    assert len(starts) == len(ends) == len(probabilities) == k
    assert (ends > starts).all() and starts[0] == 0 and ends.max() == size
    assert (np.diff(starts) >= 0).all()
    per_rank = segment_distribution(starts, ends, probabilities, size)
    assert (per_rank > 0).all() and per_rank.sum() == pytest.approx(1.0, abs=1e-12)
    if size >= k:  # the segments tile the ranks, each holding exactly 1/k
        np.testing.assert_array_equal(starts[1:], ends[:-1])
        np.testing.assert_allclose(probabilities * (ends - starts), 1 / k)


def test_fewer_ranks_than_segments_repeat_ranks_by_hand():
    # α = 0.7, 3 ranks, k = 8: the quantiles (j + ½)/8 of the weights 1, 2^−0.7, 3^−0.7 fall
    # 4, 2 and 2 times on ranks 1, 2 and 3, each segment a single rank: a batch holds each
    # rank exactly that often, and a rank's probability is its count over 8.
    sampler = filled(10, [0.5, 0.1, 0.9])  # raw 0.51, 0.11, 0.91: ranks 2, 3, 1
    sampler.resort()
    np.testing.assert_array_equal(sampler.probabilities(8)[:4], [0.25, 0.25, 0.5, 0.0])
    indices, probabilities = sampler.sample(8)
    np.testing.assert_array_equal(np.sort(indices), [0, 0, 1, 1, 2, 2, 2, 2])
    np.testing.assert_array_equal(probabilities, np.where(indices == 2, 0.5, 0.25))
    assert sampler.min_probability() == 0.25


def test_a_new_slot_enters_at_rank_one_with_the_raw_max_priority():
    sampler = filled(10, [0.5, 0.1])
    sampler.update(np.array([0]), np.array([4.0]))
    sampler.add(2)  # ties slot 0 at 4.0 and rises above it
    assert sampler.max_priority == 4.0  # raw: α enters only the rank distribution
    # 3 ranks, k = 8: rank 1 has 4/8, ranks 2 and 3 have 2/8 each (see the test above).
    np.testing.assert_array_equal(sampler.probabilities(8)[:3], [0.25, 0.25, 0.5])


def test_draw_j_lies_in_segment_j():
    rng = np.random.default_rng(4)
    sampler = RankBasedSampler(500, rng)
    for slot in range(500):
        sampler.add(slot)
    sampler.update(np.arange(500), rng.uniform(0.01, 1.01, size=500))
    for batch_size in (1, 7, 32):
        for _ in range(50):
            indices, _ = sampler.sample(batch_size)
            state = sampler.state_dict()
            positions = state["heap_positions"][indices]
            starts, ends = state["partition_starts"], state["partition_ends"]
            assert ((starts <= positions) & (positions < ends)).all()


def test_cached_partition_is_reused_near_its_size_and_never_overshoots():
    sampler = filled(3000, np.zeros(2000), seed=1)
    sampler.sample(32)
    built = sampler.state_dict()["partition_starts"]
    for slot in range(1980, 2000):  # 1 % fewer: reused, the last segment shrinks
        sampler.remove(slot)
    stated = sampler.probabilities(32)
    assert stated.sum() == pytest.approx(1.0)
    assert max(sampler.sample(32)[0].max() for _ in range(300)) < 1980
    np.testing.assert_array_equal(sampler.probabilities(32), stated)  # what it said it would use
    state = sampler.state_dict()
    np.testing.assert_array_equal(state["partition_starts"], built)
    assert state["partition_ends"][-1] == 1980
    for slot in range(1980, 2021):  # 1.05 % more than it was built for: rebuilt
        sampler.add(slot)
    sampler.sample(32)
    assert sampler.state_dict()["partition_size"] == 2021
    sampler.set_priority_exponent(0.3)  # α changes the boundaries: rebuilt
    sampler.sample(32)
    assert not np.array_equal(sampler.state_dict()["partition_starts"], built)


def test_right_edge_uniforms_stay_inside_their_segment():
    class AlmostOne:
        def random(self, size):
            return np.full(size, np.nextafter(1.0, 0.0))

    sampler = filled(5000, np.zeros(4999), rng=AlmostOne())
    indices, _ = sampler.sample(32)
    state = sampler.state_dict()
    last = state["heap_slots"][state["partition_ends"] - 1]  # each segment's last position
    np.testing.assert_array_equal(indices, last)


def test_resort_happens_every_resort_period_adds():
    rng = np.random.default_rng(2)
    sampler = RankBasedSampler(100, rng, resort_period=50)
    for slot in range(49):
        sampler.add(slot)
        sampler.update(np.array([slot]), rng.uniform(0, 0.9, size=1))
    assert (np.diff(sampler.priorities()) > 0).any()  # a heap, not sorted
    sampler.add(49)
    assert (np.diff(sampler.priorities()) <= 0).all()
    assert_heap_consistent(sampler)


def test_duplicate_indices_in_one_update_keep_the_last():
    sampler = filled(8, np.zeros(8))
    sampler.update(np.array([3, 3, 5, 3]), np.array([0.11, 0.91, 0.31, 0.41]))
    assert_heap_consistent(sampler)
    assert sampler.state_dict()["heap_slots"][0] == 3  # rank 1
    sampler.resort()
    assert sampler.state_dict()["heap_slots"][:2].tolist() == [3, 5]
    np.testing.assert_allclose(sampler.priorities()[:3], [0.41, 0.31, 0.01])


def test_min_probability_needs_a_batch_size():
    sampler = filled(4, np.zeros(2))
    with pytest.raises(ValueError, match="sample first"):
        sampler.min_probability()


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "update", "resort", "sample"]),
        st.integers(0, 24),
        st.floats(0, 2, allow_nan=False),
    ),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS)
def test_heap_and_distribution_match_a_naive_model(operations):
    sampler = RankBasedSampler(25, np.random.default_rng(0), resort_period=13)
    model, max_priority = {}, 1.0
    for name, slot, value in operations:
        if name == "add" and slot not in model:
            sampler.add(slot)
            model[slot] = max_priority
            assert sampler.state_dict()["heap_slots"][0] == slot  # rank 1
        elif name == "remove" and slot in model:
            sampler.remove(slot)
            del model[slot]
        elif name == "update" and slot in model:
            sampler.update(np.array([slot]), np.array([value]))
            model[slot] = value
            max_priority = max(max_priority, model[slot])
        elif name == "resort":
            sampler.resort()
        elif name == "sample" and model:
            k = slot + 1
            indices, probabilities = sampler.sample(k)
            assert set(indices.tolist()) <= set(model)
            stated = sampler.probabilities(k)
            np.testing.assert_array_equal(probabilities, stated[indices])
            np.testing.assert_array_equal(np.flatnonzero(stated), sorted(model))
            size, heap_slots = len(model), sampler.state_dict()["heap_slots"]
            cumulative = rank_cumulative_weights(25, sampler.priority_exponent)
            segments = equal_probability_segments(cumulative, size, k)
            by_position = segment_distribution(*segments, size)  # rank = heap position + 1
            np.testing.assert_array_equal(stated[heap_slots[:size]], by_position)
            assert stated.sum() == pytest.approx(1.0)
            assert sampler.min_probability() == stated[stated > 0].min()
        assert len(sampler) == len(model) and sampler.max_priority == max_priority
        np.testing.assert_array_equal(np.sort(sampler.priorities()), sorted(model.values()))
        assert_heap_consistent(sampler)


def test_zero_priorities_and_bad_updates():
    sampler = RankBasedSampler(6, np.random.default_rng(0))
    for slot in range(4):
        sampler.add(slot)
    sampler.update(np.arange(4), np.zeros(4))  # ranks only need an order
    np.testing.assert_array_equal(sampler.priorities(), np.zeros(4))
    with pytest.raises(ValueError):
        sampler.update(np.array([0, 5]), np.array([1.0, 1.0]))  # slot 5 was never added
    with pytest.raises(ValueError):
        sampler.update(np.array([0, 1]), np.array([1.0, np.nan]))
    with pytest.raises(IndexError):
        sampler.update(np.array([6]), np.array([1.0]))
    np.testing.assert_array_equal(sampler.priorities(), np.zeros(4))
