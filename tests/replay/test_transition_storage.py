"""TransitionStorage on 1×1 frames whose pixel value is the global time step (frames start at
1): the frame ring's state rules, forgetting by priority, the checkpoints' ring cursor."""

import numpy as np
import pytest

from replay.storage import FrameStorage
from replay.transition_storage import TransitionStorage

H = 4


def frame(value: int) -> np.ndarray:
    return np.full((1, 1), value, dtype=np.uint8)


def transitions(storage, slots) -> tuple[np.ndarray, np.ndarray]:
    """(states, next states) of the transitions at `slots`, as rows of pixel values."""
    slots = np.asarray(slots, dtype=np.int64)
    out = np.empty((2 * len(slots), H, 1, 1), dtype=np.uint8)
    both = storage.gather_transitions(slots, out)[:, :, 0, 0]
    return both[: len(slots)], both[len(slots) :]


def storage_of(capacity: int) -> TransitionStorage:
    return TransitionStorage(capacity, history_length=H, frame_shape=(1, 1))


def test_states_start_from_zeros_and_a_terminal_alone_lets_the_stack_run_on():
    storage = storage_of(10)
    storage.start_episode(frame(1))
    storage.add(0, 0.0, False, frame(2))
    storage.add(1, 1.0, True, frame(3))  # a lost life that only stops bootstrapping
    storage.add(2, 0.5, False, frame(4))  # truncated here: its next frame is the true last
    storage.start_episode(frame(5))
    storage.add(3, -1.0, True, frame(6))
    states, next_states = transitions(storage, [0, 1, 2, 3])
    np.testing.assert_array_equal(states, [[0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3], [0, 0, 0, 5]])
    np.testing.assert_array_equal(
        next_states, [[0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4], [0, 0, 5, 6]]
    )
    np.testing.assert_array_equal(storage.terminals[:4], [0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(storage.actions[:4], [0, 1, 2, 3])
    np.testing.assert_array_equal(np.flatnonzero(storage.sampleable), [0, 1, 2, 3])


def random_episodes(storages, steps: int, seed: int) -> None:
    """The same random stream of episodes, terminals and truncations into each storage."""
    rng = np.random.default_rng(seed)
    value = 1
    for storage in storages:
        storage.start_episode(frame(value))
    for _ in range(steps):
        value = value % 255 + 1
        roll = rng.random()
        for storage in storages:
            if roll < 0.15:
                storage.start_episode(frame(value))
            else:
                storage.add(int(roll * 40) % 4, roll, roll > 0.85, frame(value))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_transition_equals_the_frame_rings(seed):
    ring, whole = FrameStorage(400, H, (1, 1)), storage_of(400)
    random_episodes([ring, whole], steps=300, seed=seed)
    ring_slots = np.flatnonzero(ring.sampleable)  # in time order: the ring has not wrapped
    assert len(ring_slots) == whole.num_sampleable
    whole_slots = np.arange(whole.num_sampleable)  # filled in order
    for name in ("actions", "rewards", "terminals"):
        np.testing.assert_array_equal(
            getattr(ring, name)[ring_slots], getattr(whole, name)[whole_slots]
        )
    for ring_part, whole_part in zip(
        transitions(ring, ring_slots), transitions(whole, whole_slots), strict=True
    ):
        np.testing.assert_array_equal(ring_part, whole_part)


def test_a_full_memory_forgets_the_lowest_priority_then_the_oldest():
    storage = storage_of(4)
    storage.start_episode(frame(1))
    for t in range(2, 6):  # slots 0..3, all at the max priority 1
        assert storage.add(0, 0.0, False, frame(t)).left == []
    changes = storage.add(0, 0.0, False, frame(6))  # no priorities yet: the oldest goes
    assert (changes.left, changes.entered) == ([0], [0])
    storage.prioritize(np.array([0, 1, 2, 3]), np.array([0.5, 0.25, 0.25, 0.75]))
    changes = storage.add(0, 0.0, False, frame(7))  # 1 and 2 tie at 0.25: 1 is older
    assert (changes.left, changes.entered) == ([1], [1])
    storage.add(0, 0.0, False, frame(8))
    assert storage.sampleable.all()
    np.testing.assert_array_equal(transitions(storage, [2, 1])[1][:, -1], [8, 7])
    storage.prioritize(np.array([0]), np.array([0.125]))  # the newest transition, now lowest
    assert storage.add(0, 0.0, False, frame(9)).left == [0]


def test_new_transitions_enter_at_the_largest_priority_so_far():
    storage = storage_of(3)
    storage.start_episode(frame(1))
    for t in range(2, 5):
        storage.add(0, 0.0, False, frame(t))
    storage.prioritize(np.array([0, 1, 2]), np.array([1.5, 0.5, 1.25]))
    storage.add(0, 0.0, False, frame(5))  # replaces slot 1 at priority 1.5
    storage.prioritize(np.array([0, 2]), np.array([2.0, 1.75]))
    assert storage.add(0, 0.0, False, frame(6)).left == [1]  # 1.5 < 1.75 < 2


def test_every_slot_written_since_a_count_lies_in_the_ring_positions_after_it():
    """What the checkpoint store copies incrementally: the slots at ring positions
    s … frames_written − 1 (mod capacity)."""
    rng = np.random.default_rng(4)
    storage = storage_of(8)
    storage.start_episode(frame(1))
    counts, slots_written = [0], []
    for t in range(2, 60):
        slots_written.append(storage.add(0, 0.0, False, frame(t)).entered[0])
        counts.append(storage.frames_written)
        live = np.flatnonzero(storage.sampleable)
        storage.prioritize(live, rng.uniform(0.1, 2.0, size=len(live)))
    assert counts[:9] == list(range(9))  # filling: one position per write, as a ring
    for since in range(len(slots_written)):
        for until in range(since + 1, len(slots_written) + 1):
            start, end = counts[since], counts[until]
            covered = {position % 8 for position in range(start, min(end, start + 8))}
            assert set(slots_written[since:until]) <= covered


def test_state_round_trip_continues_identically():
    original, restored = storage_of(5), storage_of(5)
    original.start_episode(frame(1))
    for t in range(2, 9):
        original.add(t % 3, float(t), t % 4 == 0, frame(t))
    original.prioritize(np.arange(5), np.array([0.5, 0.25, 1.5, 0.75, 1.0]))
    restored.load_state_dict(original.state_dict())
    restored.frames[:] = original.frames  # what the checkpoint store does
    for t in range(9, 15):
        changes = [storage.add(1, 0.0, False, frame(t)) for storage in (original, restored)]
        assert changes[0] == changes[1]
    for name in ("frames", "actions", "rewards", "terminals", "sampleable"):
        np.testing.assert_array_equal(getattr(original, name), getattr(restored, name))
    assert original.frames_written == restored.frames_written


def test_add_before_any_episode_is_an_error():
    with pytest.raises(RuntimeError, match="before start_episode"):
        storage_of(4).add(0, 0.0, False, frame(1))


def test_a_slot_holds_every_frame_of_its_transition():
    assert TransitionStorage.frames_per_slot(4) == 5
    assert storage_of(3).frames.shape == (3, H + 1, 1, 1)


def test_only_the_frame_ring_keeps_a_copy_of_its_frames_on_a_device():
    """Refused by the replay's schema, before any storage is built or device touched."""
    from replay.settings import ReplaySettings
    from schema import typed

    with pytest.raises(ValueError) as error:
        typed(ReplaySettings, {"eviction": "lowest_priority", "device": "cuda"})
    assert str(error.value) == (
        "replay.device=cuda is not allowed: must be cpu, or agent.device's CUDA device with "
        "replay.eviction=fifo"
    )
