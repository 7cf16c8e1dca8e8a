"""Double DQN learner: online and target networks plus optimizer (never the replay or env)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from agents.networks import NatureQNetwork
from agents.optimizer import CenteredRMSProp

_ALLOWED_DEVICES = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def resolve_device(name: str) -> torch.device:
    """Map the `agent.device` setting to a torch.device: 'auto' is cuda when available, else
    cpu. Raises a one-line ValueError for unknown names and for CUDA without a usable GPU."""
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
    return torch.device(name)


class Batch(Protocol):
    """What `learn` reads (the replay's batch). B = len(actions).

    all_states: uint8 (2B, history, 84, 84); rows [:B] are S_j, rows [B:] are S_{j+1}.
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
    Huber loss. mean_q: mean over the batch of Q_online(S, A) before the update."""

    td_errors: np.ndarray
    loss: float
    mean_q: float


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


class PinnedStaging:
    """Reusable page-locked host buffers for host-to-GPU copies of same-shaped batches.

    `to_device` copies each numpy array into its buffer (a plain CPU copy), then starts an
    asynchronous copy to `device`. A buffer may be overwritten only after its previous
    transfer finished; `DoubleDQN.learn` guarantees that by ending with a blocking `.cpu()`
    on the same stream. Buffers are (re)allocated when the shapes or dtypes change.
    """

    def __init__(self, device: torch.device, pin_memory: bool = True) -> None:
        self.device, self.pin_memory = device, pin_memory
        self.buffers: list[torch.Tensor] = []

    def to_device(self, arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
        sources = [torch.from_numpy(array) for array in arrays]
        layout = [(s.shape, s.dtype) for s in sources]
        if layout != [(b.shape, b.dtype) for b in self.buffers]:
            self.buffers = [
                torch.empty(shape, dtype=dtype, pin_memory=self.pin_memory)
                for shape, dtype in layout
            ]
        return [
            buffer.copy_(source).to(self.device, non_blocking=True)
            for buffer, source in zip(self.buffers, sources, strict=True)
        ]


class DoubleDQN:
    """Online and target NatureQNetworks and a CenteredRMSProp on the online parameters.

    Keyword names equal the keys of configs/agent/double_dqn.yaml, plus `batch_size` (the
    loop's `train.batch_size`, which sets the optimizer's ε). `rng` is the only source
    of randomness: it seeds the network initialisation and draws exploratory actions.
    The target network only changes through `sync_target` (or `load_state_dict`).
    `single_forward` (True on CUDA) picks how `learn` evaluates next states; see `_online_q`.
    """

    def __init__(
        self,
        num_actions: int,
        *,
        rng: np.random.Generator,
        device: str = "auto",
        history_length: int = 4,
        discount: float = 0.99,
        learning_rate: float = 0.00025,
        rmsprop_decay: float = 0.95,
        rmsprop_epsilon: float = 0.01,
        td_error_clip: float = 1.0,
        batch_size: int = 32,
    ) -> None:
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"agent.discount must be in [0, 1], got {discount}")
        if not td_error_clip > 0.0:
            raise ValueError(f"agent.td_error_clip must be > 0, got {td_error_clip}")
        self.num_actions, self.history_length = num_actions, history_length
        self.discount, self.td_error_clip = discount, td_error_clip
        self.device = resolve_device(device)
        self._rng = rng
        # Seed a forked torch RNG from `rng` so the initial weights are reproducible without
        # touching torch's global generator state.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng.integers(2**63)))
            self.online = NatureQNetwork(num_actions, history_length).to(self.device)
            self.target = NatureQNetwork(num_actions, history_length).to(self.device)
        self.target.requires_grad_(False)
        self.sync_target()
        # `rmsprop_epsilon` is DeepMind's, for a loss summed over the minibatch. Ours is the
        # mean (gradients B times smaller), and ε / B² inside the square root gives exactly
        # the summed loss's update, at any batch size B.
        self.optimizer = CenteredRMSProp(
            self.online.parameters(),
            lr=learning_rate,
            decay=rmsprop_decay,
            epsilon=rmsprop_epsilon / batch_size**2,
        )
        self._staging = PinnedStaging(self.device) if self.device.type == "cuda" else None
        self.single_forward = self.device.type == "cuda"  # see _online_q

    def act(self, state: np.ndarray, epsilon: float, rng: np.random.Generator | None = None) -> int:
        """Epsilon-greedy action for a uint8 (history_length, 84, 84) state. Exactly one
        uniform draw per call decides exploration, so the rng stream does not depend on Q.
        `rng` defaults to the agent's own; an evaluator passes its own generator so that
        evaluating never shifts the training stream."""
        rng = self._rng if rng is None else rng
        if rng.random() < epsilon:
            return int(rng.integers(self.num_actions))
        with torch.inference_mode():
            frames = torch.from_numpy(state).to(self.device).unsqueeze(0)
            return int(self.online(frames).argmax(dim=1).item())

    def learn(self, batch: Batch) -> LearnStats:
        """One optimizer step on the weighted Huber loss of the Double-Q TD errors."""
        batch_size = _check_batch(batch, self.history_length)
        all_states, actions, rewards, terminals, weights = self._to_device(
            (batch.all_states, batch.actions, batch.rewards, batch.terminals, batch.weights)
        )
        q_states, next_q_online = self._online_q(all_states, batch_size)
        q_taken = q_states.gather(1, actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q_target = self.target(all_states[batch_size:])
            targets = double_q_targets(
                next_q_online, next_q_target, rewards, terminals, self.discount
            )
        td_errors = targets - q_taken
        loss = weighted_huber_loss(td_errors, weights, self.td_error_clip)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        with torch.no_grad():
            summary = torch.cat([td_errors, loss.reshape(1), q_taken.mean().reshape(1)])
        host = summary.cpu().numpy()  # the one device-to-host transfer, also a sync point
        return LearnStats(
            td_errors=host[:batch_size].copy(),
            loss=float(host[batch_size]),
            mean_q=float(host[batch_size + 1]),
        )

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

    def _to_device(self, arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
        if self._staging is None:  # CPU: zero-copy views, valid for the duration of learn()
            return [torch.from_numpy(array) for array in arrays]
        return self._staging.to_device(arrays)

    def sync_target(self) -> None:
        """Hard copy of the online parameters into the target network."""
        self.target.load_state_dict(self.online.state_dict())

    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain numbers only: loadable with torch.load(weights_only=True)."""
        return {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])


def _check_batch(batch: Batch, history_length: int) -> int:
    """Validate dtypes and shapes (cheap, and a wrong dtype would otherwise fail deep inside
    torch or silently promote); returns the batch size B."""
    batch_size = batch.actions.shape[0]
    expected = {
        "all_states": (np.uint8, (2 * batch_size, history_length, 84, 84)),
        "actions": (np.int64, (batch_size,)),
        "rewards": (np.float32, (batch_size,)),
        "terminals": (np.float32, (batch_size,)),
        "weights": (np.float32, (batch_size,)),
    }
    for name, (dtype, shape) in expected.items():
        array = getattr(batch, name)
        if array.dtype != dtype or array.shape != shape:
            raise ValueError(
                f"batch.{name} must be {np.dtype(dtype)} {shape}, got {array.dtype} {array.shape}"
            )
    return batch_size
