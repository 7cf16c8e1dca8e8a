import functools
from types import SimpleNamespace

import numpy as np
import pytest

from replay.buffer import NonFiniteTDErrors, ReplayBuffer, memory_bytes
from replay.proportional import ProportionalSampler
from replay.sampler import UniformSampler
from replay.settings import ReplaySettings
from replay.storage import FrameStorage
from replay.transition_storage import TransitionStorage
from schema import typed

STORAGES = {"fifo": FrameStorage, "lowest_priority": TransitionStorage}


def frame(value: int) -> np.ndarray:
    return np.full((1, 1), value, dtype=np.uint8)


def learned(td_errors, norms=None) -> SimpleNamespace:
    """What the learner returns for a batch (agents.updates.LearnStats)."""
    return SimpleNamespace(
        td_errors=np.asarray(td_errors, dtype=np.float32), parameter_change_norms=norms
    )


def filled_buffer(
    capacity=16, steps=40, batch_size=8, seed=0, normalization="batch", storage=FrameStorage
):
    buffer = ReplayBuffer(
        storage(capacity, history_length=4, frame_shape=(1, 1)),
        UniformSampler(capacity, np.random.default_rng(seed)),
        batch_size,
        normalization,
        nonfinite_patience=3,
        td_error_clip=1.0,
    )
    buffer.start_episode(frame(1))
    for t in range(2, steps + 2):
        if t % 11 == 0:
            buffer.start_episode(frame(t))
        else:
            buffer.add(t % 3, float(t), t % 7 == 0, frame(t))
    return buffer


def proportional_buffer(signal: str, capacity=16, **options) -> ReplayBuffer:
    """A frame ring whose slots 0..4 hold transitions, drawn proportionally with α = 1."""
    storage = FrameStorage(capacity, history_length=4, frame_shape=(1, 1))
    sampler = ProportionalSampler(capacity, np.random.default_rng(0), priority_exponent=1.0)
    options = {"td_error_clip": 1.0, **options}
    buffer = ReplayBuffer(storage, sampler, 2, priority_signal=signal, **options)
    buffer.start_episode(frame(1))
    for t in range(2, 7):
        buffer.add(0, 0.0, False, frame(t))
    return buffer


def raw_priorities(buffer: ReplayBuffer, slots) -> np.ndarray:
    return buffer.sampler.state_dict()["raw_priorities"][slots]


@pytest.mark.parametrize("storage", list(STORAGES.values()))
def test_sampler_tracks_exactly_the_storages_sampleable_slots(storage):
    buffer = filled_buffer(storage=storage)
    members = np.flatnonzero(buffer.sampler.probabilities(buffer.batch_size))
    np.testing.assert_array_equal(members, np.flatnonzero(buffer.storage.sampleable))
    assert len(buffer) == buffer.storage.num_sampleable


@pytest.mark.parametrize("normalization", ["batch", "buffer"])
def test_uniform_batches_have_weights_of_exactly_one(normalization):
    buffer = filled_buffer(normalization=normalization)
    for beta in (0.0, 0.4, 1.0):
        batch = buffer.sample(beta)
        assert batch.weights.dtype == np.float32
        assert np.all(batch.weights == 1.0)


@pytest.mark.parametrize("storage", list(STORAGES.values()))
def test_a_batch_is_the_stored_transitions_with_next_states_in_the_second_half(storage):
    buffer = filled_buffer(storage=storage)
    storage = buffer.storage
    batch = buffer.sample(0.4)
    assert storage.sampleable[batch.indices].all()
    assert batch.all_states.shape == (16, 4, 1, 1)
    assert np.shares_memory(batch.states, batch.all_states)
    for row, slot in enumerate(batch.indices):
        # Pixel values are time steps: a next state's newest frame is one step later.
        assert batch.next_states[row, -1, 0, 0] == batch.states[row, -1, 0, 0] + 1
        np.testing.assert_array_equal(batch.next_states[row, :-1], batch.states[row, 1:])
        assert batch.actions[row] == storage.actions[slot]
        assert batch.rewards[row] == storage.rewards[slot]
        assert batch.terminals[row] == storage.terminals[slot]


def test_nonfinite_td_errors_are_counted_and_stop_the_run_when_they_persist():
    buffer = filled_buffer()
    indices = buffer.sample(0.4).indices
    errors = np.zeros(len(indices), dtype=np.float32)
    errors[0], errors[1] = np.nan, np.inf
    buffer.update_priorities(indices, learned(errors))
    buffer.update_priorities(indices, learned(errors))
    assert buffer.nonfinite_td_errors == 4
    buffer.update_priorities(indices, learned(np.zeros_like(errors)))  # a good batch resets it
    buffer.update_priorities(indices, learned(errors))
    buffer.update_priorities(indices, learned(errors))
    with pytest.raises(NonFiniteTDErrors, match="3 consecutive batches"):
        buffer.update_priorities(indices, learned(errors))


def test_td_error_priorities_use_the_learners_clip():
    buffer = proportional_buffer("td_error", priority_epsilon=0.25, td_error_clip=2.0)
    buffer.update_priorities(np.array([0, 1, 2]), learned([-5.0, 1.5, 0.25]))
    np.testing.assert_array_equal(raw_priorities(buffer, [0, 1, 2]), [2.25, 1.75, 0.5])
    assert buffer.max_priority == 2.25


def test_td_error_change_priorities_follow_each_transitions_own_history():
    buffer = proportional_buffer("td_error_change", priority_epsilon=0.125)
    buffer.update_priorities(np.array([0, 1]), learned([0.5, -2.0]))  # first replays
    np.testing.assert_array_equal(raw_priorities(buffer, [0, 1]), [0.625, 1.125])
    buffer.update_priorities(np.array([0, 2]), learned([-0.75, 0.25]))
    # Slot 0: |0.75 − 0.5|; slot 2 is replayed for the first time.
    np.testing.assert_array_equal(raw_priorities(buffer, [0, 1, 2]), [0.375, 1.125, 0.375])
    buffer.update_priorities(np.array([1, 1]), learned([0.5, 0.5]))  # a repeat: same δ twice
    assert raw_priorities(buffer, [1])[0] == 0.625  # |0.5 − min(2, 1)| + ε, not from 0.5


def test_a_reused_slot_starts_a_new_td_error_history():
    buffer = proportional_buffer("td_error_change", priority_epsilon=0.125)
    buffer.update_priorities(np.array([0]), learned([0.75]))
    for t in range(7, 19):  # the ring wraps: slot 0 leaves and holds a new transition
        buffer.add(0, 0.0, False, frame(t))
    assert buffer.storage.sampleable[0] and buffer.storage.frames[0, 0, 0] == 17
    buffer.update_priorities(np.array([0]), learned([0.5]))
    assert raw_priorities(buffer, [0])[0] == 0.625  # |0.5 − 0|, not |0.5 − 0.75|


def test_parameter_change_priorities_are_the_learners_norms_plus_epsilon():
    buffer = proportional_buffer("parameter_change", priority_epsilon=0.25)
    buffer.update_priorities(
        np.array([0, 1, 2]), learned([9.0, 9.0, 9.0], norms=np.array([0.5, 2.0, 0.0]))
    )
    np.testing.assert_array_equal(raw_priorities(buffer, [0, 1, 2]), [0.75, 2.25, 0.25])
    assert buffer.max_priority == 2.25


def test_a_nonfinite_norm_leaves_its_transition_out_like_a_nonfinite_td_error():
    buffer = proportional_buffer("parameter_change", priority_epsilon=0.25)
    buffer.update_priorities(np.array([0, 1]), learned([0.0, 0.0], norms=np.array([np.nan, 0.5])))
    np.testing.assert_array_equal(raw_priorities(buffer, [0, 1]), [1.0, 0.75])
    assert buffer.nonfinite_td_errors == 1


def test_parameter_change_without_norms_is_a_one_line_error():
    buffer = proportional_buffer("parameter_change")
    with pytest.raises(ValueError, match="needs the learner's parameter_change_norms"):
        buffer.update_priorities(np.array([0]), learned([0.5]))


def test_bad_signal_settings_are_one_line_errors_naming_the_key():
    with pytest.raises(ValueError, match="replay.priority_signal=loss is not allowed"):
        proportional_buffer("loss")
    with pytest.raises(
        ValueError, match="replay.priority_epsilon=0.0 is not allowed: must be a number > 0"
    ):
        typed(ReplaySettings, {"priority_epsilon": 0.0})  # the buffer trusts what it is given


def test_uniform_sampling_still_forgets_by_the_signals_priorities():
    buffer = filled_buffer(capacity=4, steps=4, storage=TransitionStorage)  # slots 0..3 full
    buffer.update_priorities(np.array([0, 1, 2, 3]), learned([0.5, 0.125, 0.75, 0.25]))
    np.testing.assert_array_equal(buffer.sampler.priorities(), np.ones(4))  # uniform ignores them
    buffer.add(0, 0.0, False, frame(99))
    assert buffer.storage.sampleable.all() and buffer.storage.frames[1, -1, 0, 0] == 99


def test_memory_counts_every_frame_a_slot_stores():
    assert memory_bytes(10, (84, 84)) == 10 * (7056 + 160)
    assert memory_bytes(10, (84, 84), frames_per_slot=5) == 10 * (5 * 7056 + 160)


def test_transitions_replaced_between_a_draw_and_its_update_keep_their_own_priorities():
    """Pipelined mode stores 4 steps between drawing a batch and writing its priorities: the
    slots those steps rewrite hold other transitions by then and are left alone."""
    storage = FrameStorage(12, history_length=4, frame_shape=(1, 1))
    sampler = ProportionalSampler(12, np.random.default_rng(0), priority_exponent=1.0)
    buffer = ReplayBuffer(storage, sampler, 2, priority_signal="td_error", td_error_clip=1.0)
    buffer.start_episode(frame(1))
    for t in range(2, 20):  # the ring has wrapped: slots 7..4 hold the 8 newest transitions
        buffer.add(0, 0.0, False, frame(t))
    buffer.sample(0.4)
    drawn = np.flatnonzero(storage.sampleable)
    for t in range(20, 24):
        buffer.add(0, 0.0, False, frame(t))
    replaced = ~storage.sampleable[drawn] | (buffer.statistics.added_at[drawn] >= 18)
    assert 0 < replaced.sum() < len(drawn)
    buffer.update_priorities(drawn, learned(np.full(len(drawn), 0.5)))
    kept = drawn[~replaced]
    np.testing.assert_array_equal(raw_priorities(buffer, kept), 0.51)
    back = drawn[replaced & storage.sampleable[drawn]]  # new transitions in old slots
    np.testing.assert_array_equal(raw_priorities(buffer, back), 1.0)


def test_a_replay_with_its_frames_on_the_learners_device_hands_out_the_same_batch():
    """`replay.device`: the batch's states come as a tensor on that device (a CPU tensor stands
    in for the GPU), equal to the host replay's; everything else is unchanged."""
    import torch

    host = filled_buffer(capacity=16, steps=40, seed=3)
    on_device = filled_buffer(
        capacity=16, steps=40, seed=3, storage=functools.partial(FrameStorage, device="cpu")
    )
    expected, batch = host.sample(0.4), on_device.sample(0.4)
    assert isinstance(batch.all_states, torch.Tensor)
    np.testing.assert_array_equal(batch.all_states.numpy(), expected.all_states)
    np.testing.assert_array_equal(batch.next_states.numpy(), expected.next_states)
    np.testing.assert_array_equal(batch.indices, expected.indices)
