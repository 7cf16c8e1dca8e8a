"""The sampler protocol, the one polymorphic seam of the replay, and the uniform sampler."""

from typing import ClassVar, Protocol

import numpy as np

from replay.settings import ReplaySettings


class Sampler(Protocol):
    """Chooses storage slots to replay.

    The storage decides which slots are sampleable and announces them with `add` and `remove`;
    a sampler only ever returns slots currently added, so nothing downstream rejects or
    resamples. `sample(k)` returns k slots and, for each, its entry of `probabilities(k)`: the
    probability the importance weights need.

    `update` receives RAW priorities p > 0, finite (the replay buffer turns the learner's
    output into them with the configured `replay.priority_signals` signal; α is the sampler's
    own business). `max_priority` is what a new slot gets: the largest raw priority ever passed
    to `update`, 1 before any (always 1 for a sampler that ignores priorities); it never
    decreases, and `priorities()` holds no larger value.

    `settings` is the schema of the replay section for this sampler (`replay.settings`), and
    `from_settings` builds the sampler from a section read by it.
    """

    settings: ClassVar[type[ReplaySettings]]

    @classmethod
    def from_settings(cls, settings: ReplaySettings, rng: np.random.Generator) -> "Sampler": ...

    def add(self, index: int) -> None: ...

    def remove(self, index: int) -> None: ...

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]: ...

    def probabilities(self, batch_size: int) -> np.ndarray:
        """P over all slots (0 where not sampleable, summing to 1): P[i] is the probability
        that one draw of `sample(batch_size)`, picked uniformly from the batch, is slot i, so
        slot i appears batch_size · P[i] times per batch in expectation.

        A stratified sampler (proportional, rank-based) makes the k draws of a batch
        independent but not identically distributed: draw j has its own distribution P_j,
        confined to stratum j, and P is their mean (1/k) Σ_j P_j. Pooled over n batches, slot
        i's count then has mean n · k · P[i] and a variance no larger than under n · k i.i.d.
        draws from P (Σ_j P_j (1 − P_j) ≤ k P (1 − P)), so a chi-square test of pooled counts
        against P is valid for every sampler, conservative for a stratified one.

        A query: it changes no later draw. Raises ValueError on an empty sampler.
        """
        ...

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None: ...

    def min_probability(self) -> float:
        """The smallest positive entry of `probabilities(k)`, k the batch size last sampled."""
        ...

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

    settings = ReplaySettings

    @classmethod
    def from_settings(cls, settings: ReplaySettings, rng: np.random.Generator):
        return cls(settings.capacity, rng)

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

    def probabilities(self, batch_size: int) -> np.ndarray:
        """1/N for each of the N sampleable slots, whatever the batch size."""
        if self._size == 0:
            raise ValueError("an empty replay has no probabilities")
        probabilities = np.zeros(self._position.shape[0])
        probabilities[self._members[: self._size]] = 1.0 / self._size
        return probabilities

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
