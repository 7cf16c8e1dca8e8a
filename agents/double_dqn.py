"""The learner: online and target networks plus optimizer (never the replay or env), with the
Double DQN target (the paper's) or DQN's."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from agents.acceleration import CapturedCall, GreedyActions, PinnedStaging
from agents.networks import build_network
from agents.optimizer import OPTIMIZERS, CenteredRMSProp
from agents.per_sample import parameter_change_norms

_ALLOWED_DEVICES = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def resolve_device(name: str) -> torch.device:
    """Map the `agent.device` setting to a torch.device: 'auto' is cuda when available, else
    cpu; a CUDA device always gets its index ('cuda' is the current one), since torch's
    `cuda:0 == cuda` is False and tensors report the index. Raises a one-line ValueError for
    unknown names and for CUDA without a usable GPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    match = re.fullmatch(r"cuda(?::(\d+))?", name)
    if match is None:
        raise ValueError(f"agent.device={name!r} is not one of {_ALLOWED_DEVICES}")
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(match.group(1) or 0) >= available:
        raise ValueError(
            f"agent.device={name!r} but {available} CUDA device(s) are available; "
            f"use one of {_ALLOWED_DEVICES}"
        )
    index = match.group(1)
    return torch.device("cuda", int(index) if index else torch.cuda.current_device())


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


def weighted_huber_loss(
    td_errors: torch.Tensor, weights: torch.Tensor, kappa: float
) -> torch.Tensor:
    """mean_i weights_i * Huber_kappa(td_errors_i). Huber's derivative is clip(delta, -kappa,
    kappa), so kappa = 1 is the paper's TD-error clipping to [-1, 1]."""
    per_sample = torch.nn.functional.huber_loss(
        td_errors, torch.zeros_like(td_errors), reduction="none", delta=kappa
    )
    return (weights * per_sample).mean()


def double_q_targets(
    next_q_online: torch.Tensor,
    next_q_target: torch.Tensor,
    rewards: torch.Tensor,
    terminals: torch.Tensor,
    discount: float,
) -> torch.Tensor:
    """y = r + discount * (1 - terminal) * Q_target(S', argmax_a Q_online(S', a)): the online
    network selects the next action, the target network evaluates it (van Hasselt et al.)."""
    next_actions = next_q_online.argmax(dim=1, keepdim=True)
    next_values = next_q_target.gather(1, next_actions).squeeze(1)
    return rewards + discount * (1.0 - terminals) * next_values


def dqn_targets(
    next_q_target: torch.Tensor, rewards: torch.Tensor, terminals: torch.Tensor, discount: float
) -> torch.Tensor:
    """y = r + discount * (1 - terminal) * max_a Q_target(S', a): DQN's target (Mnih et al.
    2015), which the published MinAtar agents use."""
    return rewards + discount * (1.0 - terminals) * next_q_target.max(dim=1).values


TARGET_RULES = ("double_dqn", "dqn")


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


class DoubleDQN:
    """Online and target networks (`agent.network`) and a CenteredRMSProp on the online
    parameters; the TD target is Double DQN's or, with `target_rule="dqn"`, DQN's.

    Keyword names equal the keys of configs/agent/double_dqn.yaml, plus `batch_size` (the
    loop's `train.batch_size`, which sets the optimizer's ε) and `frame_shape` (the env's
    frames, which the network takes `history_length` of). `rng` is the only source
    of randomness: it seeds the network initialisation and draws exploratory actions.
    The target network only changes through `sync_target` (or `load_state_dict`).
    `single_forward` (True on CUDA) picks how `learn` evaluates next states; see `_online_q`.

    At most one update is in flight (`start_learning`); every other method waits for it
    first, so none ever sees half-updated parameters. `pipelined`: the training run acts
    (`explore`) with a copy of the online network taken when the update in flight started,
    so acting overlaps the update (a policy lag of one update); otherwise it acts with the
    online network, after the update.
    """

    def __init__(
        self,
        num_actions: int,
        *,
        rng: np.random.Generator,
        device: str = "auto",
        history_length: int = 4,
        frame_shape: tuple[int, ...] = (84, 84),
        network: str = "nature",
        target_rule: str = "double_dqn",
        discount: float = 0.99,
        learning_rate: float = 0.00025,
        rmsprop_decay: float = 0.95,
        rmsprop_epsilon: float = 0.01,
        optimizer: str = "deepmind_rmsprop",
        td_error_clip: float = 1.0,
        batch_size: int = 32,
        pipelined: bool = False,
        cuda_graphs: bool = True,
        compute_parameter_change_norms: bool = False,
    ) -> None:
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"agent.discount must be in [0, 1], got {discount}")
        if not td_error_clip > 0.0:
            raise ValueError(f"agent.td_error_clip must be > 0, got {td_error_clip}")
        if target_rule not in TARGET_RULES:
            raise ValueError(
                f"agent.target_rule={target_rule} is not allowed: must be one of "
                f"{', '.join(TARGET_RULES)}"
            )
        if optimizer not in OPTIMIZERS:
            raise ValueError(
                f"agent.optimizer={optimizer} is not allowed: must be one of "
                f"{', '.join(OPTIMIZERS)}"
            )
        self.num_actions, self.history_length = num_actions, history_length
        self.frame_shape, self.network, self.target_rule = tuple(frame_shape), network, target_rule
        self.discount, self.td_error_clip = discount, td_error_clip
        # Per-sample gradients cost a second backward pass: only for the priority signal
        # that reads them (`replay.priority_signal=parameter_change`).
        self.compute_parameter_change_norms = compute_parameter_change_norms
        self.device = resolve_device(device)
        self._rng = rng
        # Seed a forked torch RNG from `rng` so the initial weights are reproducible without
        # touching torch's global generator state.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng.integers(2**63)))
            self.online = build_network(network, num_actions, history_length, frame_shape)
            self.target = build_network(network, num_actions, history_length, frame_shape)
        self.online.to(self.device)
        self.target.to(self.device)
        self.target.requires_grad_(False)
        self._pending: PendingLearn | None = None
        self.sync_target()
        # DeepMind's `rmsprop_epsilon` is for a loss summed over the minibatch. Ours is the
        # mean (gradients B times smaller), and ε / B² inside the square root gives exactly
        # the summed loss's update, at any batch size B. torch's RMSprop was used on the mean
        # loss as it is (MinAtar's agents): its ε stays.
        inside = optimizer == "deepmind_rmsprop"
        self.optimizer = CenteredRMSProp(
            self.online.parameters(),
            lr=learning_rate,
            decay=rmsprop_decay,
            epsilon=rmsprop_epsilon / batch_size**2 if inside else rmsprop_epsilon,
            epsilon_inside=inside,
        )
        self.pipelined = pipelined
        self.behaviour = copy.deepcopy(self.online).requires_grad_(False) if pipelined else None
        cuda = self.device.type == "cuda"
        self.single_forward = cuda  # see _online_q
        self._graphs = cuda and cuda_graphs
        self._update = CapturedCall(self._update_step, enabled=self._graphs)
        if cuda:
            # Streams, events and graph capture without a device argument use the current
            # device: it must be this one (cuda:N, N > 0, would otherwise sync with cuda:0).
            torch.cuda.set_device(self.device)
            torch.backends.cudnn.benchmark = True  # fixed shapes: the fastest kernels win
            # The paper's arithmetic is float32: cuDNN's default TF32 convolutions round
            # inputs to 10-bit mantissas (matmuls already stay float32 by default).
            torch.backends.cudnn.allow_tf32 = False
            self._staging = PinnedStaging(self.device)
            self._update_stream = torch.cuda.Stream(self.device)
            self._summary_host = torch.empty(0, pin_memory=True)
            self._greedy: dict[int, GreedyActions] = {}
        elif pipelined:  # the update runs in a thread; torch releases the GIL in its kernels
            self._update_thread = ThreadPoolExecutor(1, thread_name_prefix="update")

    def act(self, state: np.ndarray, epsilon: float, rng: np.random.Generator | None = None) -> int:
        """Epsilon-greedy action of the online network for a uint8 (history_length,
        *frame_shape) state. Exactly one uniform draw per call decides exploration, so the
        rng stream does not depend on Q. `rng` defaults to the agent's own; an evaluator
        passes its own generator so that evaluating never shifts the training stream."""
        self.wait()
        return self._epsilon_greedy(self.online, state, epsilon, rng)

    def explore(self, state: np.ndarray, epsilon: float) -> int:
        """The training run's action: `act` with the agent's own stream, from the online
        network, or in pipelined mode from its copy taken when the update in flight started
        (the only method that does not wait for that update)."""
        if self.behaviour is None:
            return self.act(state, epsilon)
        return self._epsilon_greedy(self.behaviour, state, epsilon, None)

    def _epsilon_greedy(self, network, state, epsilon: float, rng) -> int:
        rng = self._rng if rng is None else rng
        if rng.random() < epsilon:
            return int(rng.integers(self.num_actions))
        if self.device.type == "cuda":
            if id(network) not in self._greedy:
                self._greedy[id(network)] = GreedyActions(network, self.device, self._graphs)
            return self._greedy[id(network)](state)
        with torch.inference_mode():
            frames = torch.from_numpy(state).unsqueeze(0)
            return int(network(frames).argmax(dim=1).item())

    def learn(self, batch: Batch) -> LearnStats:
        """One optimizer step on the weighted Huber loss of the Double-Q TD errors."""
        return self.start_learning(batch).result()

    def start_learning(self, batch: Batch) -> PendingLearn:
        """Start `learn`'s update and return at once where the device allows (CUDA, or a
        pipelined CPU agent); the batch's arrays must stay untouched until it is done."""
        batch_size = _check_batch(batch, (self.history_length, *self.frame_shape), self.device)
        self.wait()
        arrays = (batch.actions, batch.rewards, batch.terminals, batch.weights)
        states = batch.all_states  # a replay on the agent's device hands over a tensor there
        if isinstance(states, np.ndarray):
            arrays = (states, *arrays)
        if self.device.type == "cuda":
            inputs = self._staging.to_device(arrays)
            if len(inputs) < 5:
                inputs = [states, *inputs]
            self._pending = self._start_on_gpu(inputs, batch_size)
            return self._pending
        inputs = [torch.from_numpy(array) for array in arrays]  # zero-copy views
        if len(inputs) < 5:
            inputs = [states, *inputs]
        if self.behaviour is None:
            summary = self._update(*inputs).numpy()
            return PendingLearn(lambda: summary, batch_size)
        self._copy_to_behaviour()
        future = self._update_thread.submit(lambda: self._update(*inputs).numpy())
        self._pending = PendingLearn(future.result, batch_size)
        return self._pending

    def _start_on_gpu(self, inputs: list[torch.Tensor], batch_size: int) -> PendingLearn:
        """The update runs on its own stream. Acting (the current stream) waits for all of it,
        or in pipelined mode only for the copy of the parameters it acts with; the summary
        comes back to page-locked memory without blocking the host."""
        current, stream = torch.cuda.current_stream(), self._update_stream
        stream.wait_stream(current)  # the inputs have been copied
        if self.behaviour is not None:
            with torch.cuda.stream(stream):
                self._copy_to_behaviour()
            current.wait_stream(stream)
        with torch.cuda.stream(stream):
            summary = self._update(*inputs)
            if self._summary_host.shape != summary.shape:
                self._summary_host = torch.empty(summary.shape, pin_memory=True)
            host = self._summary_host
            host.copy_(summary, non_blocking=True)
            # An eager warm-up's summary was made on another stream: keep its memory until
            # this stream's copy has read it.
            summary.record_stream(stream)
            done = torch.cuda.Event()
            done.record()
        if self.behaviour is None:
            current.wait_stream(stream)

        def wait_for_summary() -> np.ndarray:
            done.synchronize()
            return host.numpy()

        return PendingLearn(wait_for_summary, batch_size)

    def wait(self) -> None:
        """Wait for the update in flight, if any (its stats stay with its `PendingLearn`)."""
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def _copy_to_behaviour(self) -> None:
        with torch.no_grad():
            torch._foreach_copy_(list(self.behaviour.parameters()), list(self.online.parameters()))

    def _update_step(self, all_states, actions, rewards, terminals, weights) -> torch.Tensor:
        """The update on device tensors, synchronizing with the host nowhere (it is what a
        CUDA graph captures); returns [TD errors, loss, mean Q] in one tensor."""
        batch_size = actions.shape[0]
        if self.target_rule == "dqn":  # the online network's next-state values are not used
            q_states = self.online(all_states[:batch_size])
        else:
            q_states, next_q_online = self._online_q(all_states, batch_size)
        q_taken = q_states.gather(1, actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q_target = self.target(all_states[batch_size:])
            if self.target_rule == "dqn":
                targets = dqn_targets(next_q_target, rewards, terminals, self.discount)
            else:
                targets = double_q_targets(
                    next_q_online, next_q_target, rewards, terminals, self.discount
                )
        td_errors = targets - q_taken
        loss = weighted_huber_loss(td_errors, weights, self.td_error_clip)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norms = []
        if self.compute_parameter_change_norms:  # at θ and the statistics before the step
            states = all_states[:batch_size]
            clip = self.td_error_clip
            norms.append(
                parameter_change_norms(
                    self.online, self.optimizer, states, actions, targets, weights, clip
                )
            )
        self.optimizer.step()
        with torch.no_grad():
            return torch.cat([td_errors, loss.reshape(1), q_taken.mean().reshape(1), *norms])

    def _online_q(
        self, all_states: torch.Tensor, batch_size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Q_online(S) with gradient and Q_online(S') detached (it only selects actions).

        single_forward: one forward over all 2B rows (fewer kernel launches, the GPU choice).
        Otherwise S' gets its own no-grad forward: on CPU, backpropagating through the B
        next-state rows of a joint forward made an update ~25% slower (49 vs 39 ms, B=32,
        2 threads). Both give the same values up to float rounding.
        """
        if self.single_forward:
            all_q = self.online(all_states)
            return all_q[:batch_size], all_q[batch_size:].detach()
        q_states = self.online(all_states[:batch_size])
        with torch.no_grad():
            return q_states, self.online(all_states[batch_size:])

    def sync_target(self) -> None:
        """Hard copy of the online parameters into the target network."""
        self.wait()
        self.target.load_state_dict(self.online.state_dict())

    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain numbers only: loadable with torch.load(weights_only=True)."""
        self.wait()
        state = {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }
        if self.behaviour is not None:
            state["behaviour"] = self.behaviour.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Also a pipelined agent's acting copy (the online network's if `state` has none)."""
        self.wait()
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self._update.reset()  # the optimizer's state tensors are new: capture them anew
        if self.behaviour is not None:
            self.behaviour.load_state_dict(state.get("behaviour", state["online"]))


def _check_batch(batch: Batch, state_shape: tuple[int, ...], device: torch.device) -> int:
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
