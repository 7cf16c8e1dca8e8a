"""The replay memory the training loop talks to: one storage, one interchangeable sampler."""

from dataclasses import dataclass

import numpy as np

from replay.diagnostics import ReplayStatistics
from replay.priorities import WeightNormalization, importance_weights
from replay.sampler import Sampler
from replay.storage import FrameStorage, SlotChanges


@dataclass
class Batch:
    """A minibatch in the arrays the buffer reuses for every batch (valid until the next one).

    `all_states` holds the B states followed by their B next states, so the online network can
    see both in one forward pass; `states` and `next_states` are views of its halves.
    `terminals` is 1.0 where the target must not bootstrap. `weights` are the importance
    weights, exactly 1 under uniform replay.
    """

    indices: np.ndarray
    all_states: np.ndarray
    states: np.ndarray
    next_states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    probabilities: np.ndarray
    weights: np.ndarray


# Bytes per slot beyond its frame, an upper bound over the samplers: the storage's action,
# reward and flags, the sampler's tree or heap arrays, and the replay statistics
# (benchmarks/replay_memory.py measures 7,080-7,157 B in all for 84x84 frames).
SLOT_OVERHEAD_BYTES = 160


def memory_bytes(capacity: int, frame_shape: tuple[int, int]) -> int:
    """What a full replay of `capacity` slots occupies, for a check before allocating it."""
    return capacity * (int(np.prod(frame_shape)) + SLOT_OVERHEAD_BYTES)


class NonFiniteTDErrors(FloatingPointError):
    """TD errors kept coming back NaN or infinite: the learner has diverged."""


class ReplayBuffer:
    """Glues a `FrameStorage` to a `Sampler` and hands out `Batch`es.

    The storage announces which slots become and stop being sampleable and the buffer forwards
    that to the sampler, so the two never disagree. Sampling, learning and the priority update
    happen in one loop iteration with nothing added in between, so the indices passed to
    `update_priorities` still name the transitions that were learned from.
    """

    def __init__(
        self,
        storage: FrameStorage,
        sampler: Sampler,
        batch_size: int,
        weight_normalization: WeightNormalization = "batch",
        nonfinite_patience: int = 100,
    ):
        self.storage = storage
        self.sampler = sampler
        self.batch_size = batch_size
        self.weight_normalization = weight_normalization
        self.nonfinite_patience = nonfinite_patience
        self.nonfinite_td_errors = 0
        self._nonfinite_streak = 0
        self.statistics = ReplayStatistics(storage.capacity)
        self._state_slots = np.empty(2 * batch_size, dtype=np.int64)
        self._all_states = np.empty(
            (2 * batch_size, storage.history_length, *storage.frame_shape), dtype=np.uint8
        )

    def start_episode(self, frame: np.ndarray) -> None:
        self._forward(self.storage.start_episode(frame))

    def add(self, action: int, reward: float, terminal: bool, next_frame: np.ndarray) -> None:
        self._forward(self.storage.add(action, reward, terminal, next_frame))

    def _forward(self, changes: SlotChanges) -> None:
        for slot in changes.left:
            self.sampler.remove(slot)
            self.statistics.left(slot)
        for slot in changes.entered:
            self.sampler.add(slot)
            self.statistics.entered(slot)

    def sample(self, importance_exponent: float) -> Batch:
        """Draw a minibatch; `importance_exponent` is β of the importance weights."""
        indices, probabilities = self.sampler.sample(self.batch_size)
        self.statistics.sampled(indices)
        min_probability = (
            self.sampler.min_probability() if self.weight_normalization == "buffer" else None
        )
        weights = importance_weights(
            probabilities, importance_exponent, self.weight_normalization, min_probability
        )
        batch_size = self.batch_size
        self._state_slots[:batch_size] = indices
        self._state_slots[batch_size:] = (indices + 1) % self.storage.capacity
        self.storage.gather_states(self._state_slots, out=self._all_states)
        return Batch(
            indices=indices,
            all_states=self._all_states,
            states=self._all_states[:batch_size],
            next_states=self._all_states[batch_size:],
            actions=self.storage.actions[indices],
            rewards=self.storage.rewards[indices],
            terminals=self.storage.terminals[indices],
            probabilities=probabilities,
            weights=weights,
        )

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Give the sampled transitions their new |δ|; non-finite errors are left out.

        Raises `NonFiniteTDErrors` once `nonfinite_patience` consecutive batches had any.
        """
        finite = np.isfinite(td_errors)
        if finite.all():
            self._nonfinite_streak = 0
        else:
            self.nonfinite_td_errors += int((~finite).sum())
            self._nonfinite_streak += 1
            if self._nonfinite_streak >= self.nonfinite_patience:
                raise NonFiniteTDErrors(
                    f"TD errors were NaN or infinite in {self._nonfinite_streak} consecutive "
                    f"batches ({self.nonfinite_td_errors} in all): the learner has diverged"
                )
            indices, td_errors = indices[finite], td_errors[finite]
        self.sampler.update(indices, td_errors)
        self.statistics.learned(indices, td_errors)

    @property
    def max_priority(self) -> float:
        """The raw priority a new transition gets (1 under uniform replay)."""
        return self.sampler.max_priority

    @property
    def priority_exponent(self) -> float | None:
        """α, or None for a sampler without one (uniform)."""
        return getattr(self.sampler, "priority_exponent", None)

    def set_priority_exponent(self, priority_exponent: float) -> None:
        self.sampler.set_priority_exponent(priority_exponent)

    def priorities(self) -> np.ndarray:
        """Raw priorities of the sampleable transitions."""
        return self.sampler.priorities()

    def summary(self) -> dict[str, float]:
        """Replay diagnostics for a log period (`ReplayStatistics.summary`)."""
        return self.statistics.summary(self.storage.sampleable)

    def td_error_profile(self) -> tuple[np.ndarray, np.ndarray]:
        """Last-seen |δ| (NaN if never replayed) and replays per added transition since its
        insertion, of each sampleable transition: the data of the paper's Figures 10–11."""
        return self.statistics.profile(self.storage.sampleable)

    @property
    def frames(self) -> np.ndarray:
        """The frame ring itself (checkpoints copy and restore it in place)."""
        return self.storage.frames

    @property
    def frames_written(self) -> int:
        return self.storage.frames_written

    def state_dict(self) -> dict:
        """The storage (without its frames), the sampler and the non-finite counters."""
        return {
            "storage": self.storage.state_dict(),
            "sampler": self.sampler.state_dict(),
            "nonfinite_td_errors": self.nonfinite_td_errors,
            "nonfinite_streak": self._nonfinite_streak,
            "statistics": self.statistics.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.storage.load_state_dict(state["storage"])
        self.sampler.load_state_dict(state["sampler"])
        self.nonfinite_td_errors = int(state["nonfinite_td_errors"])
        self._nonfinite_streak = int(state["nonfinite_streak"])
        self.statistics.load_state_dict(state["statistics"])

    def __len__(self) -> int:
        return len(self.sampler)
