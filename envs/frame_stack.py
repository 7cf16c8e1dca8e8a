"""The acting-side state: the last ``history_length`` frames of the current episode."""

from __future__ import annotations

import numpy as np


class FrameStack:
    """Builds the agent's state from single frames, with the same rule as the replay storage.

    The state is a uint8 array of shape ``(history_length, *frame_shape)``, oldest frame first,
    newest last. Slots before the episode's first frame are ZERO (not copies of the reset frame,
    which is what gymnasium's ``FrameStackObservation`` does), so the state after ``reset(f)`` is
    ``[0, 0, 0, f]`` and after ``push(g)`` it is ``[0, 0, f, g]``.

    ``reset``, ``push`` and ``state`` return a fresh copy (28 KB for 4×84×84) that the caller may
    keep; later pushes do not change it.
    """

    def __init__(self, history_length: int, frame_shape: tuple[int, ...]):
        if history_length < 1:
            raise ValueError(f"history_length must be >= 1, got {history_length}")
        self.history_length = history_length
        self.frame_shape = tuple(frame_shape)
        self._frames = np.zeros((history_length, *self.frame_shape), dtype=np.uint8)

    def reset(self, frame: np.ndarray) -> np.ndarray:
        """Start a new episode whose first frame is ``frame``; earlier history is discarded."""
        self._check(frame)
        self._frames.fill(0)
        self._frames[-1] = frame
        return self.state

    def push(self, frame: np.ndarray) -> np.ndarray:
        """Append the episode's next frame, dropping the oldest."""
        self._check(frame)
        self._frames[:-1] = self._frames[1:]  # numpy buffers overlapping copies, so this is safe
        self._frames[-1] = frame
        return self.state

    def load(self, state: np.ndarray) -> None:
        """Continue from a state saved earlier (a checkpoint's)."""
        self._frames[:] = state

    @property
    def state(self) -> np.ndarray:
        """A copy of the current state, shape ``(history_length, *frame_shape)``, uint8."""
        return self._frames.copy()

    def _check(self, frame: np.ndarray) -> None:
        # Broadcasting would silently accept a wrong-shaped frame, and a cast would hide
        # float frames scaled to [0, 1]; both would make acting states differ from replay states.
        if frame.shape != self.frame_shape or frame.dtype != np.uint8:
            raise ValueError(
                f"expected a uint8 frame of shape {self.frame_shape}, "
                f"got {frame.dtype} {frame.shape}"
            )
