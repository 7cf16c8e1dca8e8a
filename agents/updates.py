"""How the learner's updates run: the batch an update takes (checked), its stats, and the
update in flight, on the CPU (on CUDA: `agents.acceleration.CudaUpdates`)."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch


@dataclass(frozen=True)
class LearnStats:
    """td_errors: float32 (B,) RAW unclipped δ = y - Q_online(S, A) before the update (the
    replay clips it into priorities); loss: the weighted Huber loss; mean_q: the batch's mean
    Q_online(S, A); parameter_change_norms: float32 (B,) (`agents.per_sample`) when asked."""

    td_errors: np.ndarray
    loss: float
    mean_q: float
    parameter_change_norms: np.ndarray | None = None


class PendingLearn:
    """An update that has been started: `result()` waits for it and returns its stats, the same
    at every call, from `wait_for_summary()` (once): the host copy of `DoubleDQN.update`'s."""

    def __init__(self, wait_for_summary: Callable[[], np.ndarray], batch_size: int) -> None:
        self._wait_for_summary, self._batch_size = wait_for_summary, batch_size
        self._stats: LearnStats | None = None

    @classmethod
    def finished(cls, stats: LearnStats) -> PendingLearn:
        """An update already done (one a checkpoint kept in flight)."""
        pending = cls(lambda: np.empty(0), len(stats.td_errors))
        pending._stats = stats
        return pending

    def result(self) -> LearnStats:
        if self._stats is None:
            summary, size = self._wait_for_summary(), self._batch_size
            norms = summary[size + 2 :].copy() if len(summary) > size + 2 else None
            loss, mean_q = float(summary[size]), float(summary[size + 1])
            self._stats = LearnStats(summary[:size].copy(), loss, mean_q, norms)
        return self._stats


class Batch(Protocol):
    """What `learn` reads (the replay's batch; dtypes and shapes: `check_batch`): all_states
    rows [:B] are S_j, rows [B:] S_{j+1}; rewards already clipped; terminals 1.0 where the
    target must not bootstrap; weights the importance weights. The replay reuses these
    arrays between calls, so the agent keeps no reference to them."""

    all_states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    weights: np.ndarray


def check_batch(batch: Batch, state_shape: tuple[int, ...], device: torch.device) -> int:
    """Validate dtypes and shapes (a wrong dtype would otherwise fail deep inside torch or
    silently promote); returns B. `all_states` may be a uint8 tensor on `device`."""
    size = batch.actions.shape[0]
    for name, dtype, shape in (
        ("all_states", np.uint8, (2 * size, *state_shape)),
        ("actions", np.int64, (size,)),
        ("rewards", np.float32, (size,)),
        ("terminals", np.float32, (size,)),
        ("weights", np.float32, (size,)),
    ):
        array = getattr(batch, name)
        if isinstance(array, torch.Tensor) and name == "all_states":
            good = array.dtype == torch.uint8 and array.device == device
            dtype = f"uint8 on {device}"
        else:
            good = isinstance(array, np.ndarray) and array.dtype == dtype
            dtype = np.dtype(dtype)
        if not good or tuple(array.shape) != shape:
            raise ValueError(
                f"batch.{name} must be {dtype} {shape}, got {array.dtype} {tuple(array.shape)}"
            )
    return size


def update_inputs(batch, to_tensors: Callable[[list[np.ndarray]], list[torch.Tensor]]) -> list:
    """The update's arguments from a checked batch: its numpy arrays through one `to_tensors`
    call; states that a replay on the learner's device handed over as a tensor, as they are."""
    arrays = [batch.actions, batch.rewards, batch.terminals, batch.weights]
    if isinstance(batch.all_states, np.ndarray):
        return to_tensors([batch.all_states, *arrays])
    return [batch.all_states, *to_tensors(arrays)]


class SerialUpdates:
    """Each update (the learner's `update_step`) runs to its end as it starts (Algorithm 1's
    order), on zero-copy views of the batch's arrays: nothing in flight or captured, ever."""

    behaviour = None

    def __init__(self, update: Callable) -> None:
        self.update = held(update)

    def start(self, batch, batch_size: int) -> PendingLearn:
        inputs = update_inputs(batch, lambda arrays: [torch.from_numpy(a) for a in arrays])
        summary = self.update()(*inputs).numpy()
        return PendingLearn(lambda: summary, batch_size)

    def wait(self) -> None:
        pass

    reset = wait


def held(function: Callable) -> Callable[[], Callable]:
    """`function` through a call; weakly for a bound method (an owner holding its own is freed)."""
    return weakref.WeakMethod(function) if inspect.ismethod(function) else lambda: function
