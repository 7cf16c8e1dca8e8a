"""FrameStorage on 1×1 frames whose pixel value is the global time step (frames start at 1)."""

import tracemalloc

import numpy as np
import pytest
import torch

from envs.frame_stack import FrameStack
from replay.storage import FrameStorage

H = 4


def frame(value: int) -> np.ndarray:
    return np.full((1, 1), value, dtype=np.uint8)


def stacks(storage: FrameStorage, slots) -> np.ndarray:
    """The stored states ending at `slots`, as rows of pixel values (oldest first)."""
    slots = np.asarray(slots, dtype=np.int64)
    out = np.empty((len(slots), storage.history_length, 1, 1), dtype=np.uint8)
    return storage.gather_states(slots, out)[:, :, 0, 0]


def test_frames_before_an_episode_start_are_zero():
    storage = FrameStorage(capacity=10, history_length=H, frame_shape=(1, 1))
    storage.start_episode(frame(1))
    storage.add(0, 0.0, False, frame(2))
    storage.add(1, 1.0, False, frame(3))
    np.testing.assert_array_equal(
        stacks(storage, [0, 1, 2]), [[0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3]]
    )


def test_stacks_never_cross_into_the_previous_episode():
    storage = FrameStorage(capacity=10, history_length=H, frame_shape=(1, 1))
    storage.start_episode(frame(1))
    storage.add(0, 0.0, False, frame(2))
    storage.add(0, 0.0, True, frame(3))
    storage.start_episode(frame(4))  # slot 3
    changes = storage.add(2, -1.0, False, frame(5))  # slot 4
    np.testing.assert_array_equal(stacks(storage, [3, 4]), [[0, 0, 0, 4], [0, 0, 4, 5]])
    assert changes.entered == [3] and changes.left == []
    # The last frame of an episode gets no action, so it is never a transition.
    np.testing.assert_array_equal(np.flatnonzero(storage.sampleable), [0, 1, 3])


def test_terminal_and_truncation_differ_only_in_the_bootstrap_flag():
    storage = FrameStorage(capacity=10, history_length=H, frame_shape=(1, 1))
    storage.start_episode(frame(1))
    storage.add(3, 1.0, True, frame(2))  # terminated
    storage.start_episode(frame(3))
    storage.add(1, 0.5, False, frame(4))  # truncated by the time limit
    storage.start_episode(frame(5))
    assert storage.terminals[0] == 1.0 and storage.terminals[2] == 0.0
    assert storage.actions[2] == 1 and storage.rewards[2] == 0.5
    # A truncated transition's next state ends with the true last frame, which is stored.
    np.testing.assert_array_equal(stacks(storage, [3]), [[0, 0, 3, 4]])


def test_overwritten_slots_leave_the_sampleable_set():
    storage = FrameStorage(capacity=8, history_length=H, frame_shape=(1, 1))
    storage.start_episode(frame(1))
    for t in range(2, 9):  # fills slots 0..7; slots 0..6 have actions
        storage.add(0, 0.0, False, frame(t))
    # The h - 1 oldest slots (0, 1, 2) stack frames already replaced by writes into 5, 6, 7.
    assert storage.cursor == 0
    np.testing.assert_array_equal(np.flatnonzero(storage.sampleable), [3, 4, 5, 6])
    changes = storage.add(0, 0.0, False, frame(9))  # overwrites slot 0, cursor -> 1
    assert changes.entered == [7] and changes.left == [3]
    np.testing.assert_array_equal(np.flatnonzero(storage.sampleable), [4, 5, 6, 7])
    # Slot 7's next frame is the one in slot 0 after the wrap-around.
    np.testing.assert_array_equal(stacks(storage, [7, 0]), [[5, 6, 7, 8], [6, 7, 8, 9]])


def reference_run(capacity: int, steps: int, seed: int, device=None):
    """Drive a storage with random episodes and keep a naive full history beside it."""
    rng = np.random.default_rng(seed)
    storage = FrameStorage(capacity=capacity, history_length=H, frame_shape=(1, 1), device=device)
    history = []  # per frame written: (value, episode id, has action)
    episode, value = 0, 1
    storage.start_episode(frame(value))
    history.append([value, episode, False])
    for _ in range(steps):
        value = value % 255 + 1
        if rng.random() < 0.15:
            episode += 1
            storage.start_episode(frame(value))
        else:
            history[-1][2] = True
            storage.add(int(rng.integers(4)), 1.0, bool(rng.random() < 0.1), frame(value))
        history.append([value, episode, False])
    return storage, history


@pytest.mark.parametrize("capacity,steps,seed", [(8, 50, 0), (13, 200, 1), (64, 1000, 2)])
def test_every_sampleable_slot_matches_a_naive_history(capacity, steps, seed):
    storage, history = reference_run(capacity, steps, seed)
    oldest_kept = len(history) - capacity  # global time of the oldest frame still stored
    expected_sampleable, expected_stacks = [], []
    for t, (_, episode, has_action) in enumerate(history[:-1]):
        # Valid: it has an action and none of the frames at t - H + 1 .. t + 1 was overwritten
        # (times before 0 count as overwritten once their ring slot has been written).
        if not has_action or t - (H - 1) < oldest_kept:
            continue
        expected_sampleable.append(t % capacity)
        expected_stacks.append(
            [
                history[u][0] if u >= 0 and history[u][1] == episode else 0
                for u in range(t - 3, t + 1)
            ]
        )
    order = np.argsort(expected_sampleable)
    np.testing.assert_array_equal(
        np.flatnonzero(storage.sampleable), np.asarray(expected_sampleable)[order]
    )
    assert storage.num_sampleable == len(expected_sampleable)
    np.testing.assert_array_equal(
        stacks(storage, np.asarray(expected_sampleable)[order]), np.asarray(expected_stacks)[order]
    )


def test_acting_side_state_equals_the_stored_state():
    rng = np.random.default_rng(3)
    storage = FrameStorage(capacity=16, history_length=H, frame_shape=(1, 1))
    stack = FrameStack(history_length=H, frame_shape=(1, 1))
    value = 1
    acting = stack.reset(frame(value)).copy()
    storage.start_episode(frame(value))
    for _ in range(100):
        newest = (storage.cursor - 1) % storage.capacity
        np.testing.assert_array_equal(stacks(storage, [newest])[0], acting[:, 0, 0])
        value = value % 255 + 1
        if rng.random() < 0.2:
            acting = stack.reset(frame(value)).copy()
            storage.start_episode(frame(value))
        else:
            acting = stack.push(frame(value)).copy()
            storage.add(0, 0.0, bool(rng.random() < 0.3), frame(value))


def stacked_one_frame_at_a_time(storage: FrameStorage, newest_slot: int) -> np.ndarray:
    """The state ending at `newest_slot`, frame by frame: the frame of each of the h slots up
    to it, zero where an episode starts at a later slot of the same stack."""
    h, capacity = storage.history_length, storage.capacity
    slots = [(newest_slot - h + 1 + position) % capacity for position in range(h)]
    state = np.stack([storage.frames[slot] for slot in slots])
    for position in range(h - 1):
        if any(storage.episode_starts[slot] for slot in slots[position + 1 :]):
            state[position] = 0
    return state


def ring_of_random_episodes(
    capacity: int, history_length: int, frame_shape: tuple, steps: int, seed: int, device=None
) -> FrameStorage:
    """`steps` writes of random non-zero frames, a fifth of them starting a new episode (some
    episodes are a lone first frame), so that states cross episode starts everywhere."""
    rng = np.random.default_rng(seed)
    storage = FrameStorage(capacity, history_length, frame_shape, device=device)
    storage.start_episode(rng.integers(1, 256, frame_shape, dtype=np.uint8))
    for _ in range(steps):
        frame = rng.integers(1, 256, frame_shape, dtype=np.uint8)
        if rng.random() < 0.2:
            storage.start_episode(frame)
        else:
            storage.add(int(rng.integers(4)), 0.0, False, frame)
    return storage


@pytest.mark.parametrize(
    "capacity,frame_shape,seed", [(11, (1, 1), 0), (32, (2, 3, 3), 1), (64, (84, 84), 2)]
)
def test_a_batch_of_transitions_is_gathered_exactly_frame_by_frame(capacity, frame_shape, seed):
    steps = 10 * capacity + capacity // 2  # round the ring ten times, the cursor mid-ring
    storage = ring_of_random_episodes(capacity, H, frame_shape, steps, seed)
    indices = np.flatnonzero(storage.sampleable)
    assert ((indices < H - 1) | (indices == capacity - 1)).any()  # stacks across the ring's end
    out = np.full((2 * len(indices), H, *frame_shape), 99, dtype=np.uint8)
    storage.gather_transitions(indices, out)
    expected = [stacked_one_frame_at_a_time(storage, i) for i in indices]
    expected += [stacked_one_frame_at_a_time(storage, (i + 1) % capacity) for i in indices]
    expected = np.stack(expected)
    assert (expected[:, 0] == 0).any()  # padding before an episode's first frame is in there
    np.testing.assert_array_equal(out, expected)


def test_a_batch_is_gathered_into_its_buffer_without_a_temporary_copy():
    """numpy's np.take in its default mode fills a temporary as large as the batch and then
    copies it into `out`."""
    storage = ring_of_random_episodes(64, H, (84, 84), 200, seed=3)
    indices = np.flatnonzero(storage.sampleable)[:16]
    out = np.empty((2 * len(indices), H, 84, 84), dtype=np.uint8)
    tracemalloc.start()
    try:
        storage.gather_transitions(indices, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < out.nbytes / 10


def test_capacity_must_hold_a_stack_and_its_successor():
    with pytest.raises(ValueError, match="replay.capacity=5 must be at least"):
        FrameStorage(capacity=5, history_length=4, frame_shape=(84, 84))


def test_add_before_any_episode_is_an_error():
    storage = FrameStorage(capacity=10, history_length=H, frame_shape=(1, 1))
    with pytest.raises(RuntimeError, match="before start_episode"):
        storage.add(0, 0.0, False, frame(1))


CUDA = pytest.param(
    "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
)


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_copy_of_the_ring_on_the_learners_device_gathers_the_same_states(seed, device):
    """`replay.device`: the frames also live where the learner runs, and states gathered there
    are the host's, episode starts and wrap-around included; a restored storage refreshes its
    copy. (Without a GPU a CPU tensor stands in for it: the same torch code path.)"""
    host, _ = reference_run(64, 300, seed)
    mirrored, _ = reference_run(64, 300, seed, device=device)
    slots = np.flatnonzero(host.sampleable)
    expected = stacks(host, slots)
    assert (expected == 0).any() and (expected != 0).any()
    out = torch.empty((len(slots), H, 1, 1), dtype=torch.uint8, device=device)
    gathered = mirrored.gather_states(slots, out)[:, :, 0, 0].cpu().numpy()
    np.testing.assert_array_equal(gathered, expected)
    restored = FrameStorage(64, H, (1, 1), device=device)
    restored.frames[:] = host.frames  # as the checkpoint store fills it, before the state
    restored.load_state_dict(host.state_dict())
    out.zero_()
    gathered = restored.gather_states(slots, out)[:, :, 0, 0].cpu().numpy()
    np.testing.assert_array_equal(gathered, expected)
