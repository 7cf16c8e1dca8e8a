"""What the training loop needs from an environment. `envs.atari.make_env` builds the Atari
one; another environment is one module with a factory like it, and a config group."""

from typing import Any, Protocol

import numpy as np


class TrainingEnv(Protocol):
    """One game as single preprocessed frames. `info` carries `life_lost` (the game goes on)
    and `episode_frame_number` (emulator frames since the reset); `capture_state` and
    `restore_state` make a checkpointed run continue exactly."""

    action_space: Any  # a discrete space: `action_space.n` actions

    def reset(self, *, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]: ...

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]: ...

    def noops_after_life_loss(self) -> tuple[np.ndarray, bool, dict[str, Any]]: ...

    def capture_state(self) -> dict[str, Any]: ...

    def restore_state(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...
