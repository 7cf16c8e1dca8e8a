"""The `Sampler` contract of replay/sampler.py, checked through the protocol alone on every
sampler in `replay.registry.SAMPLERS`, built as train.py builds it from its preset, and with
every storage behind a replay buffer: a sampler added to the registry is checked unchanged."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from omegaconf import OmegaConf
from scipy.stats import chisquare

from replay.buffer import ReplayBuffer
from replay.registry import SAMPLERS, STORAGES
from schema import typed

PRESETS = Path(__file__).resolve().parents[2] / "configs" / "replay"


@pytest.fixture(params=list(SAMPLERS))
def kind(request):
    return request.param


def make(kind, capacity, rng=None):
    """The sampler `kind` with the settings of `configs/replay/<kind>.yaml` and `capacity`."""
    preset = OmegaConf.to_container(OmegaConf.load(PRESETS / f"{kind}.yaml")).get("replay", {})
    rng = np.random.default_rng(0) if rng is None else rng
    settings = {**preset, "kind": kind, "capacity": capacity}
    return SAMPLERS[kind].from_settings(typed(SAMPLERS[kind].settings, settings), rng)


def sampleable(sampler) -> np.ndarray:
    """The slots a sampler can draw, by its stated probabilities."""
    if len(sampler) == 0:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(sampler.probabilities(1) > 0)


def assert_states_its_probabilities(sampler, members, batch_size, indices, probabilities):
    """`probabilities(k)` is a distribution over exactly the members, and `sample(k)` returned
    its entries at the slots drawn."""
    stated = sampler.probabilities(batch_size)
    np.testing.assert_array_equal(np.flatnonzero(stated), sorted(members))
    assert stated.min() >= 0 and stated.sum() == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(probabilities, stated[indices], rtol=1e-12)


def test_only_added_slots_are_returned_with_their_stated_probabilities(kind):
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
        assert_states_its_probabilities(sampler, members, batch_size, indices, probabilities)
        sampler.update(indices, rng.uniform(0.01, 2.0, size=batch_size))
        assert len(sampler) == len(members)


# (capacity, sampleable slots, batch size, raw priorities of those slots or None for none
# written): more slots than draws, fewer, single draws, ties, a heavy tail, many at the
# smallest priority ε, and holes.
FIT_CASES = {
    "spread": (60, np.arange(60), 32, lambda rng: rng.uniform(0.01, 2.0, size=60)),
    "fewer slots than draws": (8, np.arange(5), 32, lambda rng: rng.uniform(0.01, 2.0, size=5)),
    "single draws": (40, np.arange(40), 1, lambda rng: rng.uniform(0.01, 2.0, size=40)),
    "all tied": (50, np.arange(50), 16, None),
    "heavy tail": (60, np.arange(60), 32, lambda rng: rng.pareto(1.2, size=60) * 0.05 + 0.01),
    "a third at ε": (
        60,
        np.arange(60),
        32,
        lambda rng: np.r_[np.full(20, 0.01), rng.uniform(0.01, 2, 40)],
    ),
    "holes": (120, np.arange(3, 120, 3), 8, lambda rng: rng.uniform(0.01, 2.0, size=39)),
}


@pytest.mark.parametrize("case", list(FIT_CASES))
def test_draws_fit_the_stated_probabilities(kind, case):
    """Pearson's chi-square of pooled draws against probabilities(k) (valid for stratified
    draws too, see `Sampler.probabilities`), with fixed seeds; bins expected below 5 are
    lumped together."""
    capacity, slots, batch_size, priorities = FIT_CASES[case]
    rng = np.random.default_rng(17)
    sampler = make(kind, capacity, np.random.default_rng(18))
    for slot in slots:
        sampler.add(int(slot))
    if priorities is not None:
        sampler.update(slots, priorities(rng))
    batches = 32_000 // batch_size
    draws = np.concatenate([sampler.sample(batch_size)[0] for _ in range(batches)])
    counts = np.bincount(draws, minlength=capacity)
    stated = sampler.probabilities(batch_size)
    assert counts[stated == 0].sum() == 0
    expected = stated[stated > 0] * draws.size
    observed = counts[stated > 0]
    small = expected < 5
    if small.any():
        expected = np.r_[expected[~small], expected[small].sum()]
        observed = np.r_[observed[~small], observed[small].sum()]
    assert chisquare(observed, expected).pvalue > 0.001


def test_queries_change_no_draw(kind):
    """Asking for probabilities at any batch size, the smallest probability or the priorities
    between batches leaves every later draw as it was, while the size drifts."""
    plain = make(kind, 400, np.random.default_rng(3))
    asked = make(kind, 400, np.random.default_rng(3))
    rng = np.random.default_rng(4)
    for slot in range(300):
        plain.add(slot)
        asked.add(slot)
    for step in range(300):
        slot = 300 + step % 6
        for sampler in (plain, asked):  # the size drifts by up to 2 % and back
            sampler.add(slot) if step % 12 < 6 else sampler.remove(slot)
        for batch_size in (1, 7, 33, 64):
            asked.probabilities(batch_size)
        indices, probabilities = plain.sample(32)
        asked_indices, asked_probabilities = asked.sample(32)
        np.testing.assert_array_equal(indices, asked_indices)
        np.testing.assert_array_equal(probabilities, asked_probabilities)
        asked.min_probability()
        asked.priorities()
        priorities = rng.uniform(0.01, 2.0, size=32)
        plain.update(indices, priorities)
        asked.update(indices, priorities)


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


def test_sampling_or_asking_an_empty_sampler_raises(kind):
    sampler = make(kind, 4)
    with pytest.raises(ValueError):
        sampler.sample(2)
    with pytest.raises(ValueError):
        sampler.probabilities(2)


def test_the_last_slot_can_be_drawn(kind):
    # A known bug elsewhere: the last leaf of a sum tree is never reached.
    sampler = make(kind, 5)
    sampler.add(4)
    assert (sampler.sample(8)[0] == 4).all()
    sampler.add(0)
    drawn = np.concatenate([sampler.sample(2)[0] for _ in range(200)])
    assert {0, 4} == set(drawn.tolist())


def test_a_new_slot_enters_at_max_priority_which_never_decreases(kind):
    sampler = make(kind, 8)
    sampler.add(0)
    sampler.add(1)
    assert sampler.max_priority == 1.0  # p1 = 1 (Algorithm 1)
    seen = [sampler.max_priority]
    for priority in (4.0, 0.5, 2.0):
        sampler.update(np.array([0]), np.array([priority]))
        seen.append(sampler.max_priority)
    sampler.remove(1)
    seen.append(sampler.max_priority)
    assert seen == sorted(seen) and seen[-1] in (1.0, 4.0)  # 1: priorities are ignored
    before = sorted(sampler.priorities())
    assert max(before) <= sampler.max_priority
    sampler.add(2)
    assert sorted(sampler.priorities()) == sorted([*before, sampler.max_priority])


def test_min_probability_is_the_smallest_stated_probability(kind):
    rng = np.random.default_rng(5)
    sampler = make(kind, 300)
    for slot in range(0, 300, 2):
        sampler.add(slot)
    indices, _ = sampler.sample(32)
    sampler.update(indices, rng.uniform(0.01, 1.01, size=32))
    sampler.sample(32)
    stated = sampler.probabilities(32)
    assert sampler.min_probability() == pytest.approx(stated[stated > 0].min(), rel=1e-12)


def test_state_round_trip_continues_identically(kind):
    """A sampler restored from `state_dict` (and its generator's state, which the caller
    keeps) draws, updates, adds and removes exactly like the original."""
    rng = np.random.default_rng(21)
    original_rng, restored_rng = np.random.default_rng(22), np.random.default_rng(999)
    original = make(kind, 60, original_rng)
    for slot in range(50):
        original.add(slot)
    original.update(np.arange(50), rng.uniform(0.01, 1.01, size=50))
    original.sample(8)
    restored = make(kind, 60, restored_rng)
    restored.load_state_dict(original.state_dict())
    restored_rng.bit_generator.state = original_rng.bit_generator.state
    for step in range(40):
        np.testing.assert_array_equal(restored.probabilities(16), original.probabilities(16))
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


@pytest.mark.parametrize("eviction", list(STORAGES))
def test_behind_a_buffer_the_sampler_holds_exactly_the_storages_sampleable_slots(kind, eviction):
    """Random episodes (game overs, lost lives, truncations) into a small memory that fills
    and forgets many times over, with a batch learned from every fourth step."""
    capacity, rng = 24, np.random.default_rng(7)
    storage = STORAGES[eviction](capacity, history_length=4, frame_shape=(1, 1))
    buffer = ReplayBuffer(
        storage, make(kind, capacity), batch_size=8, priority_epsilon=0.01, td_error_clip=1.0
    )
    buffer.start_episode(np.ones((1, 1), dtype=np.uint8))
    for step in range(600):
        next_frame = np.full((1, 1), step % 251, dtype=np.uint8)
        if rng.random() < 0.1:
            buffer.start_episode(next_frame)
        else:
            buffer.add(int(rng.integers(4)), 0.0, bool(rng.random() < 0.1), next_frame)
        np.testing.assert_array_equal(
            sampleable(buffer.sampler), np.flatnonzero(storage.sampleable)
        )
        if step % 4 == 0 and len(buffer):
            batch = buffer.sample(0.5)
            assert storage.sampleable[batch.indices].all()
            errors = rng.normal(size=8).astype(np.float32)
            buffer.update_priorities(batch.indices, SimpleNamespace(td_errors=errors))
