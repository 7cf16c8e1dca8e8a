"""The learner: online and target networks and their optimizer (never the replay or the env),
the TD target (Double DQN's, the paper's, or DQN's), the loss, and the update: one function, run
as it is, compiled (`agents.compilation`) or captured in CUDA graphs (`agents.acceleration`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.compilation import CompiledUpdate
from agents.devices import check_pipelined, resolve_device, use_device
from agents.networks import build_network
from agents.optimizer import OPTIMIZERS, CenteredRMSProp, centered_rmsprop
from agents.per_sample import parameter_change_norms
from agents.policy import EpsilonGreedy
from agents.settings import AgentSettings
from agents.targets import double_q_targets, dqn_targets, weighted_huber_loss
from agents.updates import Batch, LearnStats, PendingLearn, SerialUpdates, check_batch


class DoubleDQN:
    """Online and target networks (`agent.network`) and a CenteredRMSProp on the online
    parameters; the TD target is Double DQN's or, with `target_rule="dqn"`, DQN's.

    `batch_size` (`train.batch_size`) sets the optimizer's ε. `rng` is the only source of
    randomness: the initial weights and the exploratory actions of `policy`, how training
    acts. The target network only changes through `sync_target` (or `load_state_dict`).
    `updates` runs the updates: at once on CPU (`SerialUpdates`), on CUDA on a stream of their
    own (`agents.acceleration.CudaUpdates`); at most one is in flight (`start_learning`), and
    every other method waits for it first.
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
            dimensions = (num_actions, self.history_length, frame_shape)
            self.online = build_network(self.network, *dimensions).to(self.device)
            self.target = build_network(self.network, *dimensions).to(self.device)
        self.target.requires_grad_(False).load_state_dict(self.online.state_dict())
        self.optimizer = _optimizer(self.online, agent, batch_size)
        self.single_forward = cuda  # see _td_errors
        self.cuda_graphs = agent.cuda_graphs
        self.compiled_update = CompiledUpdate(type(self).update) if agent.torch_compile else None
        if cuda:
            from agents.acceleration import CudaUpdates  # CUDA alone needs the CUDA corner

            self.updates = CudaUpdates(self, agent.cuda_graphs, agent.pipelined)
        else:
            self.updates = SerialUpdates(self.update_step)
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
        return None if self.compiled_update is None else self.compiled_update.failure

    def online_policy(self) -> EpsilonGreedy:
        """The policy of the online network as all updates started so far left it (this waits
        for the one in flight): what the periodic test plays. With the agent's `rng` as its
        default stream; a test passes its own."""
        self.wait()
        return self._online_policy

    def learn(self, batch: Batch) -> LearnStats:
        """`update` of `batch`, to its end."""
        return self.start_learning(batch).result()

    def start_learning(self, batch: Batch) -> PendingLearn:
        """Start `learn`'s update and return at once where the device allows (CUDA); the
        batch's arrays must stay untouched until it is done."""
        batch_size = check_batch(batch, (self.history_length, *self.frame_shape), self.device)
        return self.updates.start(batch, batch_size)

    def wait(self) -> None:
        """Wait for the update in flight, if any (its stats stay with its `PendingLearn`)."""
        self.updates.wait()

    def update_step(self, all_states, actions, rewards, terminals, weights) -> torch.Tensor:
        """`update` (compiled with `agent.torch_compile`) of the online parameters and their
        statistics, on device tensors in `Batch`'s order, states as one (2B, ...) tensor."""
        update = self.compiled_update or type(self).update
        return update(self, *self.update_state(), all_states, actions, rewards, terminals, weights)

    def update_state(self) -> tuple[list, list, list]:
        """What an update changes in place: the online parameters, in order, and their g and g2."""
        params = list(self.online.parameters())
        return (params, *self.optimizer.statistics(params))

    def update_constants(self) -> tuple:
        """The numbers an update reads as Python values, which a captured update bakes in."""
        rule = (self.target_rule, self.discount, self.td_error_clip, self.single_forward)
        groups = self.optimizer.param_groups
        steps = [(group["lr"], group["decay"], group["epsilon"]) for group in groups]
        return (*rule, self.compute_parameter_change_norms, self.optimizer.epsilon_inside, *steps)

    def update(
        self, params, grad_avgs, square_avgs, all_states, actions, rewards, terminals, weights
    ) -> torch.Tensor:
        """One optimizer step on the weighted Huber loss of the TD errors: the only update, run
        as it is, compiled or captured, so it synchronizes with the host nowhere. `params` (the
        online parameters, in order) and their g and g2 change in place, nothing else. Returns
        [TD errors, loss, mean Q, parameter-change norms if computed]. `torch.autograd.grad`
        gives `backward`'s gradients bit for bit, at less cost than `torch.func.grad`."""
        td_errors, q_taken, targets = self._td_errors(all_states, actions, rewards, terminals)
        loss = weighted_huber_loss(td_errors, weights, self.td_error_clip)
        gradients = list(torch.autograd.grad(loss, params))
        norms = []
        if self.compute_parameter_change_norms:  # at θ and the statistics before the step
            batch = (all_states[: actions.shape[0]], actions, targets, weights, self.td_error_clip)
            norms = [parameter_change_norms(self.online, self.optimizer, *batch)]
        group, inside = self.optimizer.param_groups[0], self.optimizer.epsilon_inside
        centered_rmsprop(params, gradients, grad_avgs, square_avgs, group, inside)
        with torch.no_grad():
            return torch.cat([td_errors, loss.reshape(1), q_taken.mean().reshape(1), *norms])

    def _td_errors(self, all_states, actions, rewards, terminals) -> tuple:
        """(δ, Q_online(S, A), the targets y) of a batch, δ = y - Q_online(S, A) with gradient
        through the online network. Q_online(S') only selects Double DQN's next actions:
        with `single_forward` (the GPU's choice: fewer kernel launches) from one forward over
        all 2B rows; otherwise from a no-grad forward of its own (on CPU, backpropagating
        through the next-state rows of a joint forward is slower: docs/deviations.md). Both
        give the same values up to float rounding."""
        batch_size, next_states = actions.shape[0], all_states[actions.shape[0] :]
        joint = self.single_forward and self.target_rule == "double_dqn"
        q_values = self.online(all_states if joint else all_states[:batch_size])
        q_taken = q_values[:batch_size].gather(1, actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            if self.target_rule == "dqn":
                targets = dqn_targets(self.target(next_states), rewards, terminals, self.discount)
            else:
                next_q_online = q_values[batch_size:] if joint else self.online(next_states)
                next_q = (next_q_online, self.target(next_states))
                targets = double_q_targets(*next_q, rewards, terminals, self.discount)
        return targets - q_taken, q_taken, targets

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
