import numpy as np
import pytest

from envs.frame_stack import FrameStack


def frame(value, shape=(84, 84)):
    return np.full(shape, value, dtype=np.uint8)


def test_reset_pads_with_zeros_not_the_first_frame():
    stack = FrameStack(4, (84, 84))
    state = stack.reset(frame(7))
    assert state.shape == (4, 84, 84) and state.dtype == np.uint8
    np.testing.assert_array_equal(state[:3], 0)
    np.testing.assert_array_equal(state[3], 7)


def test_push_shifts_oldest_first_newest_last():
    stack = FrameStack(4, (84, 84))
    stack.reset(frame(1))
    expected = [[0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]]
    for value, firsts in zip(range(2, 7), expected, strict=True):
        state = stack.push(frame(value))
        assert state[:, 0, 0].tolist() == firsts
        assert (state == state[:, :1, :1]).all()  # each slot is one whole frame
    np.testing.assert_array_equal(stack.state, state)


def test_frames_keep_their_pixels():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(6, 84, 84), dtype=np.uint8)
    stack = FrameStack(4, (84, 84))
    stack.reset(frames[0])
    for f in frames[1:]:
        state = stack.push(f)
    np.testing.assert_array_equal(state, frames[2:])


def test_reset_mid_episode_clears_history():
    stack = FrameStack(4, (84, 84))
    stack.reset(frame(1))
    for value in (2, 3, 4, 5):
        stack.push(frame(value))
    assert stack.reset(frame(9))[:, 0, 0].tolist() == [0, 0, 0, 9]
    assert stack.push(frame(10))[:, 0, 0].tolist() == [0, 0, 9, 10]


def test_returned_states_are_copies():
    stack = FrameStack(4, (84, 84))
    first = stack.reset(frame(1))
    second = stack.push(frame(2))
    stack.push(frame(3)).fill(255)
    assert first[:, 0, 0].tolist() == [0, 0, 0, 1]
    assert second[:, 0, 0].tolist() == [0, 0, 1, 2]
    assert stack.state[:, 0, 0].tolist() == [0, 1, 2, 3]


def test_other_history_length_and_frame_shape():
    stack = FrameStack(history_length=2, frame_shape=(3, 5))
    assert stack.reset(frame(4, (3, 5))).shape == (2, 3, 5)
    assert stack.push(frame(5, (3, 5)))[:, 0, 0].tolist() == [4, 5]


BAD_FRAMES = [np.zeros((84,), np.uint8), np.zeros((84, 84, 1), np.uint8), np.zeros((84, 84))]


@pytest.mark.parametrize("bad", BAD_FRAMES)
def test_rejects_frames_that_would_broadcast_or_cast(bad):
    stack = FrameStack(4, (84, 84))
    with pytest.raises(ValueError, match="uint8 frame of shape"):
        stack.reset(bad)
    with pytest.raises(ValueError, match="uint8 frame of shape"):
        stack.push(bad)
