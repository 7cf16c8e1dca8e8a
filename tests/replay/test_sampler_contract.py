"""The `Sampler` contract of replay/sampler.py, checked on every sampler, and with every
storage behind a replay buffer."""

from types import SimpleNamespace

import numpy as np
import pytest

from replay.buffer import ReplayBuffer
from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.registry import STORAGES
from replay.sampler import UniformSampler

FACTORIES = {
    "uniform": lambda capacity, rng: UniformSampler(capacity, rng),
    "proportional": lambda capacity, rng: ProportionalSampler(capacity, rng),
    "rank_based": lambda capacity, rng: RankBasedSampler(capacity, rng, resort_period=97),
}
PRIORITIZED = ["proportional", "rank_based"]


@pytest.fixture(params=list(FACTORIES))
def kind(request):
    return request.param


def make(kind, capacity, seed=0):
    return FACTORIES[kind](capacity, np.random.default_rng(seed))


class FixedUniforms:
    """Stands in for np.random.Generator where a test needs chosen uniforms."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float64)

    def random(self, size):
        return self.values[:size].copy()


def stated_probabilities(sampler, indices, batch_size):
    """P(slot) by each sampler's own formula, computed outside its sampling path."""
    if isinstance(sampler, UniformSampler):
        return np.full(len(indices), 1.0 / len(sampler))
    if isinstance(sampler, ProportionalSampler):
        leaves = sampler.priorities() ** sampler.priority_exponent
        mine = sampler.state_dict()["raw_priorities"][indices] ** sampler.priority_exponent
        return mine / leaves.sum()
    return sampler.rank_probabilities(batch_size)[sampler.ranks_of(indices) - 1]


def test_only_added_slots_are_returned_under_random_add_remove_update(kind):
    capacity, rng = 60, np.random.default_rng(1)
    sampler, members = make(kind, capacity), set()
    for _ in range(1500):
        roll = rng.random()
        if roll < 0.45 and len(members) < capacity:
            slot = int(rng.choice(sorted(set(range(capacity)) - members)))
            sampler.add(slot)
            members.add(slot)
        elif roll < 0.8 and members:
            slot = int(rng.choice(sorted(members)))
            sampler.remove(slot)
            members.discard(slot)
        if not members:
            continue
        batch_size = int(rng.integers(1, 40))
        indices, probabilities = sampler.sample(batch_size)
        assert set(indices.tolist()) <= members
        assert indices.shape == probabilities.shape == (batch_size,)
        assert ((probabilities > 0) & (probabilities <= 1)).all()
        np.testing.assert_allclose(
            probabilities, stated_probabilities(sampler, indices, batch_size), rtol=1e-9
        )
        sampler.update(indices, rng.uniform(0.01, 2.0, size=batch_size))
        assert len(sampler) == len(members)


def test_removed_slot_is_never_drawn_and_counts_again_once_re_added(kind):
    sampler = make(kind, 16)
    for slot in range(8):
        sampler.add(slot)
    sampler.remove(3)
    drawn = np.concatenate([sampler.sample(32)[0] for _ in range(100)])
    assert 3 not in drawn and set(drawn.tolist()) == {0, 1, 2, 4, 5, 6, 7}
    sampler.add(3)
    drawn = np.concatenate([sampler.sample(32)[0] for _ in range(100)])
    assert 3 in drawn


def test_len_counts_sampleable_slots(kind):
    sampler = make(kind, 10)
    assert len(sampler) == 0
    for slot in (9, 0, 4):
        sampler.add(slot)
    sampler.remove(0)
    assert len(sampler) == 2


def test_adding_twice_or_removing_an_absent_slot_raises(kind):
    sampler = make(kind, 10)
    sampler.add(2)
    with pytest.raises(ValueError):
        sampler.add(2)
    with pytest.raises(ValueError):
        sampler.remove(5)
    sampler.remove(2)
    with pytest.raises(ValueError):
        sampler.remove(2)


def test_sampling_an_empty_sampler_raises(kind):
    with pytest.raises(ValueError):
        make(kind, 4).sample(2)


def test_the_last_slot_can_be_drawn(kind):
    # A known bug elsewhere: the last leaf of a sum tree is never reached.
    sampler = make(kind, 5)
    sampler.add(4)
    assert (sampler.sample(8)[0] == 4).all()
    sampler.add(0)
    drawn = np.concatenate([sampler.sample(2)[0] for _ in range(200)])
    assert {0, 4} == set(drawn.tolist())


@pytest.mark.parametrize("kind", PRIORITIZED)
def test_new_slots_get_the_raw_max_priority_and_alpha_once(kind):
    # p = 4 raised to α = ½ is 2.
    cls = ProportionalSampler if kind == "proportional" else RankBasedSampler
    sampler = cls(8, np.random.default_rng(0), priority_exponent=0.5)
    sampler.add(0)
    sampler.add(1)
    assert sampler.max_priority == 1.0  # p1 = 1 (Algorithm 1)
    np.testing.assert_array_equal(np.sort(sampler.priorities()), [1.0, 1.0])
    sampler.update(np.array([0]), np.array([4.0]))
    sampler.add(2)
    assert sampler.max_priority == 4.0  # raw, not 4^½ = 2 nor 4^¼
    np.testing.assert_array_equal(np.sort(sampler.priorities()), [1.0, 4.0, 4.0])
    if kind == "proportional":
        # leaves (4^½, 1^½, 4^½) = (2, 1, 2) over 5; α applied twice would give 4^¼ = √2.
        np.testing.assert_allclose(sampler.probabilities_of(np.arange(3)), [0.4, 0.2, 0.4])
    else:
        assert sampler.ranks_of(np.array([2]))[0] == 1  # the newest max-priority one leads


@pytest.mark.parametrize("kind", PRIORITIZED)
def test_max_priority_is_a_running_max_that_never_decreases(kind):
    sampler = make(kind, 8)
    sampler.add(0)
    sampler.update(np.array([0]), np.array([1.5]))
    sampler.update(np.array([0]), np.array([0.01]))
    sampler.remove(0)
    assert sampler.max_priority == 1.5
    sampler.add(0)
    np.testing.assert_array_equal(sampler.priorities(), [1.5])


def test_proportional_draw_j_lies_in_slice_j_by_hand():
    # α = 1: priorities (1, 1, 2, 2) are the leaves, total 6, cumulative intervals
    # [0,1) [1,2) [2,4) [4,6); two slices [0,3) and [3,6).
    sampler = ProportionalSampler(4, FixedUniforms([0.5, 0.0]), priority_exponent=1.0)
    for slot in range(4):
        sampler.add(slot)
    sampler.update(np.arange(4), np.array([1.0, 1.0, 2.0, 2.0]))
    indices, probabilities = sampler.sample(2)  # targets 1.5 and 3.0
    np.testing.assert_array_equal(indices, [1, 2])
    np.testing.assert_allclose(probabilities, [1 / 6, 2 / 6])
    sampler._rng = FixedUniforms([0.0, np.nextafter(1.0, 0.0)])  # targets 0 and just below 6
    np.testing.assert_array_equal(sampler.sample(2)[0], [0, 3])


def test_proportional_draws_are_stratified_over_the_cumulative_total():
    rng = np.random.default_rng(3)
    sampler = ProportionalSampler(200, rng)
    for slot in range(200):
        sampler.add(slot)
    sampler.update(np.arange(200), rng.pareto(1.5, size=200) * 0.05 + 0.01)
    leaves = sampler.probabilities_of(np.arange(200))
    interval_ends = np.cumsum(leaves)
    for _ in range(200):
        indices, _ = sampler.sample(16)
        ends, starts = interval_ends[indices], interval_ends[indices] - leaves[indices]
        slices = np.arange(16) / 16
        assert ((starts <= slices + 1 / 16 + 1e-12) & (ends >= slices - 1e-12)).all()


def test_rank_based_draw_j_lies_in_segment_j():
    rng = np.random.default_rng(4)
    sampler = RankBasedSampler(500, rng)
    for slot in range(500):
        sampler.add(slot)
    sampler.update(np.arange(500), rng.uniform(0.01, 1.01, size=500))
    for batch_size in (1, 7, 32):
        starts, ends = sampler.segment_bounds(batch_size)
        for _ in range(50):
            positions = sampler.ranks_of(sampler.sample(batch_size)[0]) - 1
            assert ((starts <= positions) & (positions < ends)).all()


def test_uniform_update_changes_nothing():
    changed, untouched = make("uniform", 20, seed=7), make("uniform", 20, seed=7)
    for slot in range(20):
        changed.add(slot)
        untouched.add(slot)
    for _ in range(10):
        indices, probabilities = changed.sample(32)
        np.testing.assert_array_equal(indices, untouched.sample(32)[0])
        np.testing.assert_array_equal(probabilities, np.full(32, 1 / 20))
        changed.update(indices, np.full(32, 100.0))
    np.testing.assert_array_equal(changed.priorities(), np.ones(20))
    assert changed.max_priority == 1.0 and changed.min_probability() == 1 / 20


def test_min_probability_is_the_smallest_stated_probability(kind):
    rng = np.random.default_rng(5)
    sampler = make(kind, 300)
    for slot in range(0, 300, 2):
        sampler.add(slot)
    indices, _ = sampler.sample(32)
    sampler.update(indices, rng.uniform(0.01, 1.01, size=32))
    sampler.sample(32)
    members = np.arange(0, 300, 2)
    smallest = stated_probabilities(sampler, members, 32).min()
    assert sampler.min_probability() == pytest.approx(smallest, rel=1e-12)


def test_state_round_trip_continues_identically(kind):
    """A sampler restored from `state_dict` (and its generator's state) draws, updates, adds
    and removes exactly like the original, whatever it was constructed with."""
    rng = np.random.default_rng(21)
    original = make(kind, 60, seed=22)
    for slot in range(50):
        original.add(slot)
    original.update(np.arange(50), rng.uniform(0.01, 1.01, size=50))
    original.sample(8)
    restored = make(kind, 60, seed=999)
    restored.load_state_dict(original.state_dict())
    restored._rng.bit_generator.state = original._rng.bit_generator.state
    for step in range(40):
        a, pa = original.sample(16)
        b, pb = restored.sample(16)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(pa, pb)
        priorities = rng.uniform(0.01, 1.01, size=16)
        original.update(a, priorities)
        restored.update(b, priorities)
        for sampler in (original, restored):
            sampler.remove(step) if step < 45 else sampler.add(step)
    assert original.min_probability() == restored.min_probability()


def members(sampler) -> np.ndarray:
    """The slots a sampler holds, sorted, read from its state."""
    state = sampler.state_dict()
    if isinstance(sampler, UniformSampler):
        return np.sort(state["members"][: state["size"]])
    if isinstance(sampler, ProportionalSampler):
        return np.flatnonzero(state["raw_priorities"] > 0)
    return np.sort(state["heap_slots"][: state["size"]])


@pytest.mark.parametrize("eviction", list(STORAGES))
def test_behind_a_buffer_the_sampler_holds_exactly_the_storages_sampleable_slots(kind, eviction):
    """Random episodes (game overs, lost lives, truncations) into a small memory that fills
    and forgets many times over, with a batch learned from every fourth step."""
    capacity, rng = 24, np.random.default_rng(7)
    storage = STORAGES[eviction](capacity, history_length=4, frame_shape=(1, 1))
    buffer = ReplayBuffer(storage, make(kind, capacity), batch_size=8, priority_epsilon=0.01)
    buffer.start_episode(np.ones((1, 1), dtype=np.uint8))
    for step in range(600):
        next_frame = np.full((1, 1), step % 251, dtype=np.uint8)
        if rng.random() < 0.1:
            buffer.start_episode(next_frame)
        else:
            buffer.add(int(rng.integers(4)), 0.0, bool(rng.random() < 0.1), next_frame)
        np.testing.assert_array_equal(members(buffer.sampler), np.flatnonzero(storage.sampleable))
        if step % 4 == 0 and len(buffer):
            batch = buffer.sample(0.5)
            assert storage.sampleable[batch.indices].all()
            errors = rng.normal(size=8).astype(np.float32)
            buffer.update_priorities(batch.indices, SimpleNamespace(td_errors=errors))
