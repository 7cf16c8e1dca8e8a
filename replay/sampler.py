"""The sampler protocol, the one polymorphic seam of the replay, and the uniform sampler."""

from typing import Protocol

import numpy as np


class Sampler(Protocol):
    """Chooses storage slots to replay.

    The storage decides which slots are sampleable and announces them with `add` and `remove`;
    a sampler only ever returns slots currently added, so nothing downstream rejects or
    resamples. `sample` returns the slots and the probability with which each was drawn under
    the sampler's own distribution, which is what the importance weights need.

    `update` receives RAW priorities p > 0, finite (the replay buffer turns the learner's
    output into them with the configured `replay.priority_signals` signal; α is the sampler's
    own business). `max_priority` is the largest raw priority ever passed to `update`, 1 before
    any: what a new slot gets.
    """

    def add(self, index: int) -> None: ...

    def remove(self, index: int) -> None: ...

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]: ...

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None: ...

    def min_probability(self) -> float: ...

    def priorities(self) -> np.ndarray: ...

    def set_priority_exponent(self, priority_exponent: float) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    @property
    def max_priority(self) -> float: ...

    def __len__(self) -> int: ...


class UniformSampler:
    """Draws sampleable slots uniformly with replacement, as DQN's replay does.

    Invariant: `_members[:_size]` holds each sampleable slot exactly once and
    `_position[slot]` is its place there (−1 when absent), so add, remove and each draw are
    O(1). Every slot has priority 1, so probabilities are 1/N and importance weights are 1.
    """

    def __init__(self, capacity: int, rng: np.random.Generator):
        self._rng = rng
        self._members = np.empty(capacity, dtype=np.int64)
        self._position = np.full(capacity, -1, dtype=np.int64)
        self._size = 0

    def add(self, index: int) -> None:
        if self._position[index] >= 0:
            raise ValueError(f"slot {index} is already sampleable")
        self._members[self._size] = index
        self._position[index] = self._size
        self._size += 1

    def remove(self, index: int) -> None:
        position = self._position[index]
        if position < 0:
            raise ValueError(f"slot {index} is not sampleable")
        last = self._members[self._size - 1]
        self._members[position] = last
        self._position[last] = position
        self._position[index] = -1
        self._size -= 1

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay")
        indices = self._members[self._rng.integers(0, self._size, size=batch_size)]
        return indices, np.full(batch_size, 1.0 / self._size)

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Uniform replay ignores priorities."""

    def min_probability(self) -> float:
        return 1.0 / self._size

    def priorities(self) -> np.ndarray:
        return np.ones(self._size)

    def set_priority_exponent(self, priority_exponent: float) -> None:
        """Every priority is 1, so α changes nothing."""

    @property
    def max_priority(self) -> float:
        return 1.0

    def state_dict(self) -> dict:
        return {
            "members": self._members.copy(),
            "position": self._position.copy(),
            "size": self._size,
        }

    def load_state_dict(self, state: dict) -> None:
        self._members[:] = state["members"]
        self._position[:] = state["position"]
        self._size = int(state["size"])

    def __len__(self) -> int:
        return self._size
