"""The replay memory the training loop talks to: one storage, one interchangeable sampler, one
priority signal."""

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from replay.diagnostics import ReplayStatistics
from replay.priorities import WeightNormalization, importance_weights
from replay.priority_signals import SignalInputs, signal_named
from replay.sampler import Sampler
from replay.settings import ReplaySettings
from replay.storage import SlotChanges, Storage


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


class Learned(Protocol):
    """What the learner returned for a batch (`agents.updates.LearnStats`): the raw TD
    errors δ (B,), and the per-transition parameter-change norms (B,) where the priority
    signal reads them (None otherwise)."""

    td_errors: np.ndarray
    parameter_change_norms: np.ndarray | None


# Bytes per slot beyond its frames, an upper bound over the samplers and storages: the
# storage's action, reward and flags (and the eviction tree of the transition storage), the
# sampler's tree or heap arrays, and the replay statistics (benchmarks/replay_memory.py
# measures the whole: docs/benchmarks.md, docs/replay.md).
SLOT_OVERHEAD_BYTES = 160


def memory_bytes(capacity: int, frame_shape: tuple[int, int], frames_per_slot: int = 1) -> int:
    """What a full replay of `capacity` slots of `frames_per_slot` frames each occupies
    (`Storage.frames_per_slot`), for a check before allocating it."""
    return capacity * (frames_per_slot * int(np.prod(frame_shape)) + SLOT_OVERHEAD_BYTES)


class NonFiniteTDErrors(FloatingPointError):
    """TD errors kept coming back NaN or infinite: the learner has diverged."""


class ReplayBuffer:
    """Glues a `Storage` to a `Sampler` and hands out `Batch`es.

    The storage announces which slots become and stop being sampleable and the buffer forwards
    that to the sampler, so the two never disagree. Sampling, learning and the priority update
    happen in one loop iteration with nothing added in between, so the indices passed to
    `update_priorities` still name the transitions that were learned from.

    Priorities: the buffer turns what the learner returned into raw priorities with the
    signal `priority_signal` (`replay.priority_signals`) and hands the same values to the
    sampler (which draws by them, or ignores them: uniform) and to the storage (which forgets
    by them, or ignores them: the frame ring). A transition's previous |δ| is the replay
    statistics' last-seen |δ| (NaN until its first replay, reset when its slot is reused).
    `weight_normalization`, `priority_signal` and `priority_epsilon` are replay settings
    (`replay.settings.ReplaySettings`: their defaults and rules); `td_error_clip` is the
    learner's, the one clip of the loss and the priorities.

    `pin_memory` (for a learner on CUDA with the frames on the host): the states are gathered
    into page-locked memory, which the learner copies to its device directly. A batch's
    arrays are overwritten by the next `sample` only, so the learner's copy of them must be
    done by then (the loop finishes each update before it draws the next batch).
    """

    def __init__(
        self,
        storage: Storage,
        sampler: Sampler,
        batch_size: int,
        weight_normalization: WeightNormalization = ReplaySettings.weight_normalization,
        nonfinite_patience: int = 100,
        *,
        priority_signal: str = ReplaySettings.priority_signal,
        priority_epsilon: float = ReplaySettings.priority_epsilon,
        td_error_clip: float,
        pin_memory: bool = False,
    ):
        self._signal = signal_named(priority_signal)
        self._priority_epsilon, self._td_error_clip = priority_epsilon, td_error_clip
        self.storage = storage
        self.sampler = sampler
        self.batch_size = batch_size
        self.weight_normalization = weight_normalization
        self.nonfinite_patience = nonfinite_patience
        self.nonfinite_td_errors = 0
        self._nonfinite_streak = 0
        self.statistics = ReplayStatistics(storage.capacity)
        # Transitions added before the last batch was drawn (None: nothing drawn yet).
        self._added_before_sample: int | None = None
        shape = (2 * batch_size, storage.history_length, *storage.frame_shape)
        device = getattr(storage, "device", None)  # a storage with a copy on the learner's device
        self._all_states = (
            torch.empty(shape, dtype=torch.uint8, pin_memory=pin_memory).numpy()
            if device is None
            else torch.empty(shape, dtype=torch.uint8, device=device)
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
        self._added_before_sample = self.statistics.added
        min_probability = (
            self.sampler.min_probability() if self.weight_normalization == "buffer" else None
        )
        weights = importance_weights(
            probabilities, importance_exponent, self.weight_normalization, min_probability
        )
        batch_size = self.batch_size
        self.storage.gather_transitions(indices, out=self._all_states)
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

    def update_priorities(self, indices: np.ndarray, learned: Learned) -> None:
        """Give the sampled transitions their new priorities from what the learner returned;
        transitions whose δ (or parameter-change norm, where the signal reads it) is NaN or
        infinite are left out, as if not replayed.

        `indices` are those of the last batch drawn. Transitions added since then may have
        replaced some of them (the pipelined loop stores 4 steps before it writes an update's
        priorities); those slots hold other transitions now, and are left alone.

        Raises `NonFiniteTDErrors` once `nonfinite_patience` consecutive batches had any.
        """
        td_errors = learned.td_errors
        norms = None
        if self._signal.reads_parameter_change_norms:
            norms = getattr(learned, "parameter_change_norms", None)
            if norms is None:
                raise ValueError(
                    "replay.priority_signal=parameter_change needs the learner's "
                    "parameter_change_norms, and it returned none"
                )
        if self._added_before_sample not in (None, self.statistics.added):
            drawn = self.statistics.added_at[indices] < self._added_before_sample
            still_there = drawn & self.storage.sampleable[indices]
            indices, td_errors = indices[still_there], td_errors[still_there]
            norms = None if norms is None else norms[still_there]
        finite = np.isfinite(td_errors)
        if norms is not None:
            finite &= np.isfinite(norms)
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
            norms = None if norms is None else norms[finite]
        previous = None
        if self._signal.reads_previous_td_errors:
            previous = self.statistics.last_abs_td_error[indices]
        priorities = self._signal.priorities(
            SignalInputs(td_errors, previous, norms), self._priority_epsilon, self._td_error_clip
        )
        self.sampler.update(indices, priorities)
        self.storage.prioritize(indices, priorities)
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
        """The storage's frames (checkpoints copy and restore them in place)."""
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
            "added_before_sample": self._added_before_sample,
        }

    def load_state_dict(self, state: dict) -> None:
        self.storage.load_state_dict(state["storage"])
        self.sampler.load_state_dict(state["sampler"])
        self.nonfinite_td_errors = int(state["nonfinite_td_errors"])
        self._nonfinite_streak = int(state["nonfinite_streak"])
        self.statistics.load_state_dict(state["statistics"])
        added = state["added_before_sample"]
        self._added_before_sample = None if added is None else int(added)

    def __len__(self) -> int:
        return len(self.sampler)
