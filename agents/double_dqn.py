"""The learner: online and target networks and their optimizer (never the replay or the env),
the TD target (Double DQN's, the paper's, or DQN's), the loss, and one update step. It acts
through an ε-greedy policy (`agents.policy`) and runs its updates through `agents.updates`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from agents.acceleration import Capture, CapturedCall, capture_cuda_graph
from agents.compilation import CompiledUpdate
from agents.devices import check_pipelined, resolve_device, use_device
from agents.networks import build_network
from agents.optimizer import OPTIMIZERS, CenteredRMSProp, centered_rmsprop
from agents.per_sample import parameter_change_norms
from agents.policy import EpsilonGreedy
from agents.settings import AgentSettings
from agents.targets import double_q_targets, dqn_targets, weighted_huber_loss
from agents.updates import (
    Batch,
    CudaUpdates,
    LearnStats,
    PendingLearn,
    SerialUpdates,
    check_batch,
)


class DoubleDQN:
    """Online and target networks (`agent.network`) and a CenteredRMSProp on the online
    parameters; the TD target is Double DQN's or, with `target_rule="dqn"`, DQN's.

    `agent` holds the agent's settings (`AgentSettings`, the config's `agent` section, each
    checked where it was read); `batch_size` is the loop's `train.batch_size`, which
    sets the optimizer's ε, and `frame_shape` the env's frames, which the network takes
    `history_length` of. `rng` is the only source of randomness: it seeds the network
    initialisation and draws exploratory actions.
    The target network only changes through `sync_target` (or `load_state_dict`).
    `single_forward` (True on CUDA) picks how an update evaluates next states; see `_online_q`.

    `policy` is how training acts (with `rng`); `updates` runs the updates (`agents.updates`:
    at once on CPU; on CUDA on a stream of their own, captured in graphs when `cuda_graphs`).
    At most one update is in flight (`start_learning`); every other method waits for it
    first, so none ever sees half-updated parameters. `pipelined` (CUDA only): training acts
    with a copy of the online network taken when the update in flight started, so acting
    overlaps the update (a policy lag of one update); otherwise with the online network,
    after the update.
    """

    def __init__(
        self,
        num_actions: int,
        agent: AgentSettings,
        *,
        rng: np.random.Generator,
        frame_shape: tuple[int, ...],
        batch_size: int,
        compute_parameter_change_norms: bool = False,
    ) -> None:
        self.num_actions, self.history_length = num_actions, agent.history_length
        self.frame_shape, self.network = tuple(frame_shape), agent.network
        self.target_rule, self.discount = agent.target_rule, agent.discount
        self.td_error_clip = agent.td_error_clip
        # Per-sample gradients cost a second backward pass: only for the priority signal
        # that reads them (`replay.priority_signal=parameter_change`).
        self.compute_parameter_change_norms = compute_parameter_change_norms
        self.device = resolve_device(agent.device)
        cuda = self.device.type == "cuda"
        check_pipelined(agent.pipelined, self.device)
        use_device(self.device)
        # Seed a forked torch RNG from `rng` so the initial weights are reproducible without
        # touching torch's global generator state.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng.integers(2**63)))
            self.online = build_network(self.network, num_actions, self.history_length, frame_shape)
            self.target = build_network(self.network, num_actions, self.history_length, frame_shape)
        self.online.to(self.device)
        self.target.to(self.device)
        self.target.requires_grad_(False)
        self.target.load_state_dict(self.online.state_dict())
        self.optimizer = _optimizer(self.online, agent, batch_size)
        self.single_forward = cuda  # see _online_q
        self.cuda_graphs = agent.cuda_graphs
        if agent.torch_compile and compute_parameter_change_norms:
            raise ValueError(
                "agent.torch_compile=true is not allowed with replay.priority_signal="
                "parameter_change: its per-sample gradients are computed eagerly"
            )
        self._compiled = CompiledUpdate(self) if agent.torch_compile else None
        step = self._compiled or self.update_step
        update = self.captured_update(cuda and agent.cuda_graphs, step=step)
        self.updates = (
            CudaUpdates(update, self.device, self.online, agent.pipelined)
            if cuda
            else SerialUpdates(update)
        )
        acting = self.updates.behaviour if agent.pipelined else self.online
        self.policy = self._policy_of(acting, rng)
        self._online_policy = self._policy_of(self.online, rng) if agent.pipelined else self.policy

    def _policy_of(self, network: torch.nn.Module, rng: np.random.Generator) -> EpsilonGreedy:
        return EpsilonGreedy(
            network, self.device, self.num_actions, self.history_length, rng, self.cuda_graphs
        )

    @property
    def pipelined(self) -> bool:
        return self.updates.pipelined

    @property
    def compile_failure(self) -> str | None:
        """Why `torch.compile` of the update failed (its updates are eager since), or None."""
        return None if self._compiled is None else self._compiled.failure

    def online_policy(self) -> EpsilonGreedy:
        """The policy of the online network as all updates started so far left it (this waits
        for the one in flight): what the periodic test plays. With the agent's `rng` as its
        default stream; a test passes its own."""
        self.wait()
        return self._online_policy

    def learn(self, batch: Batch) -> LearnStats:
        """One optimizer step on the weighted Huber loss of the TD errors."""
        return self.start_learning(batch).result()

    def start_learning(self, batch: Batch) -> PendingLearn:
        """Start `learn`'s update and return at once where the device allows (CUDA); the
        batch's arrays must stay untouched until it is done."""
        batch_size = check_batch(batch, (self.history_length, *self.frame_shape), self.device)
        return self.updates.start(batch, batch_size)

    def wait(self) -> None:
        """Wait for the update in flight, if any (its stats stay with its `PendingLearn`)."""
        self.updates.wait()

    def captured_update(
        self, enabled: bool, capture: Capture = capture_cuda_graph, step: Callable | None = None
    ) -> CapturedCall:
        """`step` (by default `update_step`; or it compiled) as a CapturedCall on this
        learner's device: its state is what the step changes in place (the online parameters,
        the optimizer's statistics), its constants the numbers it reads as Python values (see
        `_update_constants`)."""
        return CapturedCall(
            step or self.update_step,
            name="the update",
            enabled=enabled,
            device=self.device,
            state=self._updated_tensors,
            constants=self._update_constants,
            capture=capture,
        )

    def _updated_tensors(self) -> list[torch.Tensor]:
        statistics = self.optimizer.state.values()
        return [*self.online.parameters(), *(t for state in statistics for t in state.values())]

    def _update_constants(self) -> tuple:
        """What a captured update bakes in: a change of any of these re-captures it."""
        groups = self.optimizer.param_groups
        return (
            self.target_rule,
            self.discount,
            self.td_error_clip,
            self.single_forward,
            self.compute_parameter_change_norms,
            self.optimizer.epsilon_inside,
            *((group["lr"], group["decay"], group["epsilon"]) for group in groups),
        )

    def update_step(self, all_states, actions, rewards, terminals, weights) -> torch.Tensor:
        """One update on device tensors (the arguments in `Batch`'s order, states as one
        (2B, ...) tensor), synchronizing with the host nowhere, so that a CUDA graph can
        capture it; returns [TD errors, loss, mean Q, parameter-change norms if computed] in
        one tensor. It changes the online parameters and the optimizer's statistics, nothing
        else."""
        td_errors, q_taken, targets = self._td_errors(
            self.online, all_states, actions, rewards, terminals
        )
        loss = weighted_huber_loss(td_errors, weights, self.td_error_clip)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norms = []
        if self.compute_parameter_change_norms:  # at θ and the statistics before the step
            states = all_states[: actions.shape[0]]
            clip = self.td_error_clip
            norms.append(
                parameter_change_norms(
                    self.online, self.optimizer, states, actions, targets, weights, clip
                )
            )
        self.optimizer.step()
        with torch.no_grad():
            return torch.cat([td_errors, loss.reshape(1), q_taken.mean().reshape(1), *norms])

    def traced_update_step(
        self, params, grad_avgs, square_avgs, all_states, actions, rewards, terminals, weights
    ) -> torch.Tensor:
        """`update_step` as one function of tensors, for `torch.compile` to trace whole:
        gradients by `torch.func` instead of `backward`, the optimizer's rule applied to
        `params` (the online parameters, in order) and their statistics in place. The same
        arithmetic, rounded differently once compiled."""
        names = [name for name, _ in self.online.named_parameters()]

        def loss_of(values: dict) -> tuple:
            def online(states: torch.Tensor) -> torch.Tensor:
                return torch.func.functional_call(self.online, values, (states,))

            td_errors, q_taken, _ = self._td_errors(online, all_states, actions, rewards, terminals)
            loss = weighted_huber_loss(td_errors, weights, self.td_error_clip)
            return loss, (td_errors, q_taken.mean())

        gradients, (loss, (td_errors, mean_q)) = torch.func.grad_and_value(loss_of, has_aux=True)(
            dict(zip(names, params, strict=True))
        )
        group = self.optimizer.param_groups[0]
        centered_rmsprop(
            params,
            [gradients[name] for name in names],
            grad_avgs,
            square_avgs,
            lr=group["lr"],
            decay=group["decay"],
            epsilon=group["epsilon"],
            epsilon_inside=self.optimizer.epsilon_inside,
        )
        with torch.no_grad():
            return torch.cat([td_errors, loss.reshape(1), mean_q.reshape(1)])

    def _td_errors(self, online, all_states, actions, rewards, terminals) -> tuple:
        """(δ, Q_online(S, A), the targets y) of a batch, δ = y - Q_online(S, A) with gradient
        through `online` (the online network, or a function of its parameters)."""
        batch_size = actions.shape[0]
        if self.target_rule == "dqn":  # the online network's next-state values are not used
            q_states = online(all_states[:batch_size])
        else:
            q_states, next_q_online = self._online_q(online, all_states, batch_size)
        q_taken = q_states.gather(1, actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q_target = self.target(all_states[batch_size:])
            if self.target_rule == "dqn":
                targets = dqn_targets(next_q_target, rewards, terminals, self.discount)
            else:
                targets = double_q_targets(
                    next_q_online, next_q_target, rewards, terminals, self.discount
                )
        return targets - q_taken, q_taken, targets

    def _online_q(
        self, online, all_states: torch.Tensor, batch_size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Q_online(S) with gradient and Q_online(S') detached (it only selects actions).

        single_forward: one forward over all 2B rows (fewer kernel launches, the GPU choice).
        Otherwise S' gets its own no-grad forward: on CPU, backpropagating through the B
        next-state rows of a joint forward makes an update slower (measured in
        docs/deviations.md). Both give the same values up to float rounding.
        """
        if self.single_forward:
            all_q = online(all_states)
            return all_q[:batch_size], all_q[batch_size:].detach()
        q_states = online(all_states[:batch_size])
        with torch.no_grad():
            return q_states, online(all_states[batch_size:])

    def step_profile(self) -> dict[str, float]:
        """The optimizer's step sizes now (`CenteredRMSProp.step_profile`), by TensorBoard tag."""
        self.wait()
        return {f"optimizer/{name}": v for name, v in self.optimizer.step_profile().items()}

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
        if self.updates.behaviour is not None:
            state["behaviour"] = self.updates.behaviour.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Also a pipelined agent's acting copy (the online network's if `state` has none)."""
        self.wait()
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates.reset()  # the optimizer's state tensors are new: capture them anew
        if self.updates.behaviour is not None:
            self.updates.behaviour.load_state_dict(state.get("behaviour", state["online"]))


def optimizer_epsilon(agent: AgentSettings, batch_size: int) -> float:
    """The ε the optimizer adds, derived here alone from `agent` and the batch size B.

    DeepMind's `rmsprop_epsilon` is for a loss summed over the minibatch. Ours is the mean
    (gradients B times smaller), and ε / B² inside the square root gives exactly the summed
    loss's update, at any B. torch's RMSprop was used on the mean loss as it is (MinAtar's
    agents): its ε stays.

    Where ε dominates the divisor (early in training) a step is η·g/√ε inside the square root,
    η·g/ε outside. `keep_maximum_step` keeps that step uniform replay's (η₀, the paper's η)
    at any `learning_rate` η: ε times (η/η₀)² inside, η/η₀ outside; for the prioritized η₀/4,
    ε/16 inside, as DQN Zoo's prioritized agent sets it."""
    inside = OPTIMIZERS[agent.optimizer]
    epsilon = agent.rmsprop_epsilon / batch_size**2 if inside else agent.rmsprop_epsilon
    if agent.keep_maximum_step:
        ratio = agent.learning_rate / AgentSettings.learning_rate
        epsilon *= ratio**2 if inside else ratio
    return epsilon


def _optimizer(online: torch.nn.Module, agent: AgentSettings, batch_size: int) -> CenteredRMSProp:
    return CenteredRMSProp(
        online.parameters(),
        lr=agent.learning_rate,
        decay=agent.rmsprop_decay,
        epsilon=optimizer_epsilon(agent, batch_size),
        epsilon_inside=OPTIMIZERS[agent.optimizer],
    )
