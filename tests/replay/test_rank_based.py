"""The rank-based sampler: heap, segments, cache rule, fit, approximation error, state."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from replay.priority_signals import td_error_priorities
from replay.rank_based import RankBasedSampler
from replay.rank_segments import (
    equal_probability_segments,
    rank_cumulative_weights,
    refit_last_segment,
)


def filled(capacity, td_errors, seed=0, **options):
    """Slots 0.. with the paper's priorities min(|δ|, 1) + 0.01 of `td_errors`."""
    sampler = RankBasedSampler(capacity, np.random.default_rng(seed), **options)
    for slot in range(len(td_errors)):
        sampler.add(slot)
    sampler.update(np.arange(len(td_errors)), td_error_priorities(np.asarray(td_errors), 0.01))
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
    # The numbers quoted in RankBasedSampler's docstring: N = 10^6, k = 32, α = 0.7.
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
    # The number quoted in RankBasedSampler's docstring: a heap of i.i.d. random priorities
    # (never resorted) versus the same segment distribution over true ranks.
    size = 2**14
    sampler = RankBasedSampler(size, np.random.default_rng(0), resort_period=10**9)
    for slot in range(size):
        sampler.add(slot)
    sampler.update(np.arange(size), np.random.default_rng(1).random(size))
    state, per_position = sampler.state_dict(), sampler.rank_probabilities(32)
    slots, keys = state["heap_slots"][:size], state["heap_keys"][:size]
    heap, sorted_ = np.empty(size), np.empty(size)
    heap[slots] = per_position
    sorted_[slots[np.argsort(-keys, kind="stable")]] = per_position
    assert total_variation(heap, sorted_) == pytest.approx(0.15, abs=0.02)


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


def test_draw_frequencies_fit_the_stated_distribution_on_a_sorted_heap():
    rng = np.random.default_rng(8)
    sampler = filled(200, rng.normal(size=200), seed=9)
    sampler.resort()
    keys = sampler.priorities()
    assert (np.diff(keys) <= 0).all()  # sorted: heap positions are true ranks
    positions = np.concatenate([sampler.ranks_of(sampler.sample(32)[0]) - 1 for _ in range(3000)])
    expected = sampler.rank_probabilities(32) * positions.size
    assert expected.min() > 5
    assert chisquare(np.bincount(positions, minlength=200), expected).pvalue > 0.001


def test_fewer_ranks_than_segments_repeat_ranks_with_summed_probabilities():
    sampler = filled(10, [0.5, 0.1, 0.9])
    sampler.resort()
    indices, probabilities = sampler.sample(8)
    starts, ends = sampler.segment_bounds(8)
    counts = np.bincount(starts, minlength=3)
    assert (counts > 0).all() and (ends == starts + 1).all()
    np.testing.assert_allclose(probabilities, counts[sampler.ranks_of(indices) - 1] / 8)
    np.testing.assert_array_equal(np.sort(sampler.ranks_of(indices) - 1), starts)
    assert sampler.min_probability() == counts.min() / 8


def test_cached_partition_is_reused_near_its_size_and_never_overshoots():
    sampler = filled(3000, np.zeros(2000), seed=1)
    sampler.sample(32)
    built = sampler.segment_bounds(32)[0]
    for slot in range(1980, 2000):  # 1 % fewer: reused, the last segment shrinks
        sampler.remove(slot)
    starts, ends = sampler.segment_bounds(32)
    np.testing.assert_array_equal(starts, built)
    assert ends[-1] == 1980 and sampler.rank_probabilities(32).sum() == pytest.approx(1.0)
    assert max(sampler.ranks_of(sampler.sample(32)[0]).max() for _ in range(300)) <= 1980
    for slot in range(1980, 2021):  # 1.05 % more than it was built for: rebuilt
        sampler.add(slot)
    sampler.sample(32)
    assert sampler.state_dict()["partition_size"] == 2021
    sampler.set_priority_exponent(0.3)  # α changes the boundaries: rebuilt
    assert not np.array_equal(sampler.segment_bounds(32)[0], built)


def test_right_edge_uniforms_stay_inside_their_segment():
    class AlmostOne:
        def random(self, size):
            return np.full(size, np.nextafter(1.0, 0.0))

    sampler = filled(5000, np.zeros(4999))
    sampler._rng = AlmostOne()
    ranks = sampler.ranks_of(sampler.sample(32)[0])
    np.testing.assert_array_equal(ranks, sampler.segment_bounds(32)[1])  # each segment's last


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
    assert sampler.ranks_of(np.array([3]))[0] == 1
    sampler.resort()
    assert sampler.ranks_of(np.array([3, 5])).tolist() == [1, 2]
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
            assert sampler.ranks_of(np.array([slot]))[0] == 1
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
            stated = sampler.rank_probabilities(k)
            np.testing.assert_allclose(probabilities, stated[sampler.ranks_of(indices) - 1])
            assert stated.sum() == pytest.approx(1.0) and (stated > 0).all()
            assert sampler.min_probability() == stated.min()
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
