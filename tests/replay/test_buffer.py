import numpy as np
import pytest

from replay.buffer import NonFiniteTDErrors, ReplayBuffer
from replay.sampler import UniformSampler
from replay.storage import FrameStorage


def frame(value: int) -> np.ndarray:
    return np.full((1, 1), value, dtype=np.uint8)


def filled_buffer(capacity=16, steps=40, batch_size=8, seed=0, normalization="batch"):
    storage = FrameStorage(capacity, history_length=4, frame_shape=(1, 1))
    sampler = UniformSampler(capacity, np.random.default_rng(seed))
    buffer = ReplayBuffer(storage, sampler, batch_size, normalization, nonfinite_patience=3)
    buffer.start_episode(frame(1))
    for t in range(2, steps + 2):
        if t % 11 == 0:
            buffer.start_episode(frame(t))
        else:
            buffer.add(t % 3, float(t), t % 7 == 0, frame(t))
    return buffer


def test_sampler_tracks_exactly_the_storages_sampleable_slots():
    buffer = filled_buffer()
    members = sorted(buffer.sampler._members[: len(buffer.sampler)])
    np.testing.assert_array_equal(members, np.flatnonzero(buffer.storage.sampleable))
    assert len(buffer) == buffer.storage.num_sampleable


@pytest.mark.parametrize("normalization", ["batch", "buffer"])
def test_uniform_batches_have_weights_of_exactly_one(normalization):
    buffer = filled_buffer(normalization=normalization)
    for beta in (0.0, 0.4, 1.0):
        batch = buffer.sample(beta)
        assert batch.weights.dtype == np.float32
        assert np.all(batch.weights == 1.0)


def test_a_batch_is_the_stored_transitions_with_next_states_in_the_second_half():
    buffer = filled_buffer()
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
    buffer.update_priorities(indices, errors)
    buffer.update_priorities(indices, errors)
    assert buffer.nonfinite_td_errors == 4
    buffer.update_priorities(indices, np.zeros_like(errors))  # a good batch resets the streak
    buffer.update_priorities(indices, errors)
    buffer.update_priorities(indices, errors)
    with pytest.raises(NonFiniteTDErrors, match="3 consecutive batches"):
        buffer.update_priorities(indices, errors)
