"""How the learner's updates run: the batch an update takes (checked), the update in flight,
and on CUDA its stream, page-locked staging, captured graphs and, in pipelined mode, the copy
of the parameters that training acts with meanwhile. What an update computes is the
learner's (`DoubleDQN.update_step`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from agents.acceleration import CapturedCall, PinnedStaging


@dataclass(frozen=True)
class LearnStats:
    """td_errors: float32 (B,) RAW unclipped delta = y - Q_online(S, A), computed before the
    update (the replay clips it and turns it into priorities). loss: the minimized weighted
    Huber loss. mean_q: mean over the batch of Q_online(S, A) before the update.
    parameter_change_norms: float32 (B,) of `agents.per_sample.parameter_change_norms` for
    this update, or None unless the agent was asked for them."""

    td_errors: np.ndarray
    loss: float
    mean_q: float
    parameter_change_norms: np.ndarray | None = None


class PendingLearn:
    """An update that has been started. `result()` waits for it and returns its stats; later
    calls return the same stats. `wait_for_summary` returns the host copy of the update's
    summary (B TD errors, the loss, the mean Q, then B parameter-change norms when the agent
    computes them); it is called at most once."""

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
            norms = summary[size + 2 :].copy()
            self._stats = LearnStats(
                td_errors=summary[:size].copy(),
                loss=float(summary[size]),
                mean_q=float(summary[size + 1]),
                parameter_change_norms=norms if len(norms) else None,
            )
        return self._stats


class Batch(Protocol):
    """What `learn` reads (the replay's batch). B = len(actions).

    all_states: uint8 (2B, history, *frame_shape); rows [:B] are S_j, rows [B:] are S_{j+1}.
    actions: int64 (B,). rewards: float32 (B,), already clipped. terminals: float32 (B,),
    1.0 where the target must not bootstrap. weights: float32 (B,) importance weights.
    The replay reuses these arrays between calls, so the agent keeps no reference to them.
    """

    all_states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    weights: np.ndarray


def check_batch(batch: Batch, state_shape: tuple[int, ...], device: torch.device) -> int:
    """Validate dtypes and shapes (cheap, and a wrong dtype would otherwise fail deep inside
    torch or silently promote); returns the batch size B. `all_states` may be a uint8 tensor
    on `device` instead of an array."""
    batch_size = batch.actions.shape[0]
    expected = {
        "all_states": (np.uint8, (2 * batch_size, *state_shape)),
        "actions": (np.int64, (batch_size,)),
        "rewards": (np.float32, (batch_size,)),
        "terminals": (np.float32, (batch_size,)),
        "weights": (np.float32, (batch_size,)),
    }
    for name, (dtype, shape) in expected.items():
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
    return batch_size


def update_inputs(batch, to_tensors: Callable[[list[np.ndarray]], list[torch.Tensor]]) -> list:
    """The update's arguments (states, actions, rewards, terminals, weights) from a checked
    batch: its numpy arrays through one `to_tensors` call; states that a replay on the
    learner's device handed over as a tensor there, as they are."""
    arrays = [batch.actions, batch.rewards, batch.terminals, batch.weights]
    if isinstance(batch.all_states, np.ndarray):
        return to_tensors([batch.all_states, *arrays])
    return [batch.all_states, *to_tensors(arrays)]


class SerialUpdates:
    """Each update runs to its end when it starts (the CPU's way: Algorithm 1's order). The
    inputs are zero-copy views of the batch's arrays."""

    pipelined = False
    behaviour = None

    def __init__(self, update: CapturedCall) -> None:
        self.update = update

    def start(self, batch, batch_size: int) -> PendingLearn:
        inputs = update_inputs(batch, lambda arrays: [torch.from_numpy(a) for a in arrays])
        summary = self.update(*inputs).numpy()
        return PendingLearn(lambda: summary, batch_size)

    def wait(self) -> None:
        """Nothing is ever in flight."""

    def reset(self) -> None:
        self.update.reset()


class CudaUpdates:
    """Updates on a CUDA device, each on the update stream while the host goes on.

    The batch's arrays go through page-locked staging into fixed device tensors; the update
    is `update` (a graph where it checks out); its summary comes back to page-locked memory
    behind an event. At most one update is in flight: `start` and `wait` finish it first.
    Acting (on the current stream) waits for all of the update, or with `pipelined` only for
    the copy of the online parameters into `behaviour` made when it started, which is what
    training then acts with (a policy lag of one update).
    """

    def __init__(
        self, update: CapturedCall, device: torch.device, online: torch.nn.Module, pipelined: bool
    ) -> None:
        self.update, self.device, self.pipelined = update, device, pipelined
        self.online = online
        self.behaviour = copy.deepcopy(online).requires_grad_(False) if pipelined else None
        self.staging = PinnedStaging(device)
        self.stream = torch.cuda.Stream(device)
        self.summary_host = torch.empty(0, pin_memory=True)
        self._pending: PendingLearn | None = None

    def start(self, batch, batch_size: int) -> PendingLearn:
        self.wait()  # the staging buffers are the previous update's inputs until it is done
        inputs = update_inputs(batch, self.staging.to_device)
        current, stream = torch.cuda.current_stream(), self.stream
        stream.wait_stream(current)  # the inputs have been copied
        if self.behaviour is not None:
            with torch.cuda.stream(stream), torch.no_grad():
                torch._foreach_copy_(
                    list(self.behaviour.parameters()), list(self.online.parameters())
                )
            current.wait_stream(stream)
        with torch.cuda.stream(stream):
            summary = self.update(*inputs)
            if self.summary_host.shape != summary.shape:
                self.summary_host = torch.empty(summary.shape, pin_memory=True)
            host = self.summary_host
            host.copy_(summary, non_blocking=True)
            # An eager call's summary was made on the captured call's own stream: keep its
            # memory until this stream's copy has read it.
            summary.record_stream(stream)
            done = torch.cuda.Event()
            done.record()
        if self.behaviour is None:
            current.wait_stream(stream)

        def wait_for_summary() -> np.ndarray:
            done.synchronize()
            return host.numpy()

        self._pending = PendingLearn(wait_for_summary, batch_size)
        return self._pending

    def wait(self) -> None:
        """Wait for the update in flight, if any (its stats stay with its `PendingLearn`)."""
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def reset(self) -> None:
        self.wait()
        self.update.reset()
