"""The learner (never the replay or the env): its networks and optimizer, and the update, one
function run as it is, compiled (`agents.compilation`) or captured (`agents.acceleration`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.compilation import CompiledUpdate
from agents.networks import build_network
from agents.optimizer import OPTIMIZERS, CenteredRMSProp, centered_rmsprop
from agents.per_sample import parameter_change_norms
from agents.policy import EpsilonGreedy, check_pipelined, resolve_device, use_device
from agents.settings import AgentSettings
from agents.targets import double_q_targets, dqn_targets, weighted_huber_loss
from agents.updates import Batch, LearnStats, PendingLearn, SerialUpdates, check_batch

STATE_PARTS = ("online", "target", "optimizer")  # what a state dict holds, in order


class DoubleDQN:
    """Online and target networks (`agent.network`), the target changed only by `sync_target`
    (or `load_state_dict`), and a CenteredRMSProp whose ε `batch_size` sets. `rng` is the only
    source of randomness: the initial weights and `policy`'s exploration (training's). The
    `updates` run at once on CPU (`SerialUpdates`), on CUDA on a stream of their own
    (`agents.acceleration.CudaUpdates`); every other method waits for the one in flight."""

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
        # A second backward pass, only for `replay.priority_signal=parameter_change`.
        self.compute_parameter_change_norms = compute_parameter_change_norms
        self.device = resolve_device(agent.device)
        cuda = self.device.type == "cuda"
        check_pipelined(agent.pipelined, self.device)
        use_device(self.device)
        # The initial weights from `rng` alone, torch's global generator untouched.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng.integers(2**63)))
            dimensions = (num_actions, self.history_length, frame_shape)
            self.online = build_network(self.network, *dimensions).to(self.device)
            self.target = build_network(self.network, *dimensions).to(self.device)
        self.target.requires_grad_(False).load_state_dict(self.online.state_dict())
        self.optimizer = CenteredRMSProp(
            self.online.parameters(),
            lr=agent.learning_rate,
            decay=agent.rmsprop_decay,
            epsilon=optimizer_epsilon(agent, batch_size),
            epsilon_inside=OPTIMIZERS[agent.optimizer],
        )
        self.single_forward = cuda  # see _td_errors
        self.cuda_graphs, self.pipelined = agent.cuda_graphs, agent.pipelined
        self.compiled_update = CompiledUpdate(type(self).update) if agent.torch_compile else None
        if cuda:
            from agents.acceleration import CudaUpdates  # CUDA alone needs the CUDA corner

            self.updates = CudaUpdates(self, agent.cuda_graphs, agent.pipelined)
        else:
            self.updates = SerialUpdates(self.update_step)
        acting = [self.updates.behaviour, self.online] if agent.pipelined else [self.online]
        shared = (self.device, num_actions, self.history_length, rng, agent.cuda_graphs)
        policies = [EpsilonGreedy(network, *shared) for network in acting]
        self.policy, self._online_policy = policies[0], policies[-1]

    @property
    def compile_failure(self) -> str | None:
        """Why `torch.compile` of the update failed (its updates are eager since), or None."""
        return None if self.compiled_update is None else self.compiled_update.failure

    def online_policy(self) -> EpsilonGreedy:
        """The policy of the online network once the update in flight is done: what the periodic
        test plays (with its own rng; the agent's is the default)."""
        self.wait()
        return self._online_policy

    def learn(self, batch: Batch) -> LearnStats:
        """`update` of `batch`, to its end."""
        return self.start_learning(batch).result()

    def start_learning(self, batch: Batch) -> PendingLearn:
        """Start `learn`'s update, returning at once on CUDA: keep the batch untouched till done."""
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
        steps = [(g["lr"], g["decay"], g["epsilon"]) for g in self.optimizer.param_groups]
        return (*rule, self.compute_parameter_change_norms, self.optimizer.epsilon_inside, *steps)

    def update(
        self, params, grad_avgs, square_avgs, all_states, actions, rewards, terminals, weights
    ) -> torch.Tensor:
        """One optimizer step on the weighted Huber loss of the TD errors, syncing with the host
        nowhere; `params` (the online parameters, in order) and their g and g2 change in place,
        nothing else. Returns [TD errors, loss, mean Q, parameter-change norms if computed].
        `torch.autograd.grad`: `backward`'s gradients bit for bit, cheaper than torch.func's."""
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
        """(δ = y - Q_online(S, A) with gradient through the online network, Q_online(S, A), y).
        Double DQN's Q_online(S') is, with `single_forward` (the GPU's: fewer launches), of one
        forward over all 2B rows, else of a no-grad forward (faster on CPU: docs/deviations.md)."""
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
        state = {name: getattr(self, name).state_dict() for name in STATE_PARTS}
        if self.updates.behaviour is not None:
            state["behaviour"] = self.updates.behaviour.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Also a pipelined agent's acting copy (the online network's if `state` has none)."""
        self.wait()
        for name in STATE_PARTS:
            getattr(self, name).load_state_dict(state[name])
        self.updates.reset()  # the optimizer's state tensors are new: capture them anew
        if self.updates.behaviour is not None:
            self.updates.behaviour.load_state_dict(state.get("behaviour", state["online"]))


def optimizer_epsilon(agent: AgentSettings, batch_size: int) -> float:
    """The ε the optimizer adds, from `agent` and the batch size B alone (docs/configuration.md):
    DeepMind's `rmsprop_epsilon`, for a minibatch-summed loss, is ε / B² inside the square root
    for our mean loss (the same update); torch's RMSprop, used on the mean loss as it is
    (MinAtar's agents), keeps its ε. `keep_maximum_step` scales ε by (η/η₀)² inside, η/η₀
    outside: the ε-dominated step (η·g/√ε, η·g/ε) stays uniform replay's (η₀) at any η."""
    inside = OPTIMIZERS[agent.optimizer]
    epsilon = agent.rmsprop_epsilon / batch_size**2 if inside else agent.rmsprop_epsilon
    if agent.keep_maximum_step:
        ratio = agent.learning_rate / AgentSettings.learning_rate
        epsilon *= ratio**2 if inside else ratio
    return epsilon
