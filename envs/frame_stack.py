"""The acting-side state: the last ``history_length`` frames of the current episode."""

from __future__ import annotations

import numpy as np


class FrameStack:
    """The agent's state from single frames, with the replay storage's rule: uint8
    ``(history_length, *frame_shape)``, oldest first, and slots before the episode's first frame
    ZERO (gymnasium's ``FrameStackObservation`` copies the reset frame instead). ``reset``,
    ``push`` and ``state`` return a fresh copy that later pushes do not change."""

    def __init__(self, history_length: int, frame_shape: tuple[int, ...]):
        if history_length < 1:
            raise ValueError(f"history_length must be >= 1, got {history_length}")
        self.history_length = history_length
        self.frame_shape = tuple(frame_shape)
        self._frames = np.zeros((history_length, *self.frame_shape), dtype=np.uint8)

    def reset(self, frame: np.ndarray) -> np.ndarray:
        self._check(frame)
        self._frames.fill(0)
        self._frames[-1] = frame
        return self.state

    def push(self, frame: np.ndarray) -> np.ndarray:
        self._check(frame)
        self._frames[:-1] = self._frames[1:]  # numpy buffers overlapping copies, so this is safe
        self._frames[-1] = frame
        return self.state

    def load(self, state: np.ndarray) -> None:
        """Continue from a state saved earlier (a checkpoint's)."""
        self._frames[:] = state

    @property
    def state(self) -> np.ndarray:
        return self._frames.copy()

    def _check(self, frame: np.ndarray) -> None:
        # Broadcasting would silently accept a wrong-shaped frame, and a cast would hide
        # float frames scaled to [0, 1]; both would make acting states differ from replay states.
        if frame.shape != self.frame_shape or frame.dtype != np.uint8:
            raise ValueError(
                f"expected a uint8 frame of shape {self.frame_shape}, "
                f"got {frame.dtype} {frame.shape}"
            )
