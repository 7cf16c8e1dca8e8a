"""parameter_change_norms against a slow reference (one backward pass per transition), the
optimizer's real step, and a hand-built case where it must equal the clipped |δ|."""

import copy
import dataclasses

import numpy as np
import pytest
import torch
from test_optimizer import SteppedRMSProp
from torch import nn

from agents.double_dqn import DoubleDQN
from agents.networks import NatureQNetwork
from agents.optimizer import CenteredRMSProp
from agents.per_sample import parameter_change_norms
from agents.settings import AgentSettings
from agents.targets import weighted_huber_loss


class TinyQ(nn.Module):
    """NatureQNetwork's interface on 2×5×5 uint8 frames: a convolution, a linear head and a
    scalar bias (a 0-d parameter, as the Nature network's shared bias)."""

    def __init__(self, num_actions: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, kernel_size=3)
        self.head = nn.Linear(27, num_actions)
        self.bias = nn.Parameter(torch.tensor(0.1))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.conv(frames.float().div_(255.0)))
        return self.head(hidden.flatten(1)) + self.bias


def warmed_up(network: nn.Module, seed: int, epsilon_inside: bool = True) -> CenteredRMSProp:
    """An optimizer whose statistics are not zero: three steps on random batches."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = SteppedRMSProp(
        network.parameters(), lr=0.01, decay=0.9, epsilon=1e-4, epsilon_inside=epsilon_inside
    )
    shape = (6, *network_input_shape(network))
    for _ in range(3):
        states = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
        optimizer.zero_grad()
        network(states).square().mean().backward()
        optimizer.step()
    return optimizer


def network_input_shape(network: nn.Module) -> tuple[int, ...]:
    return (4, 84, 84) if isinstance(network, NatureQNetwork) else (2, 5, 5)


def case(network: nn.Module, batch_size: int, seed: int):
    """States, actions, targets far enough from Q that some |δ| exceed the clip, weights."""
    generator = torch.Generator().manual_seed(seed)
    shape = (batch_size, *network_input_shape(network))
    states = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
    actions = torch.randint(0, 3, (batch_size,), generator=generator)
    targets = 3 * torch.randn(batch_size, generator=generator)
    weights = torch.rand(batch_size, generator=generator) + 0.1
    return states, actions, targets, weights


def reference_shares(network, optimizer, states, actions, targets, weights, clip):
    """Each transition's share of the step, Δθ_i = −lr · (g_i / B) / D, and its state's
    sensitivity s_i = ‖∇Q_i / D‖, from one backward pass per transition, in float64."""
    params = list(network.parameters())
    group = optimizer.param_groups[0]
    lr, decay, epsilon = group["lr"], group["decay"], group["epsilon"]
    batch_size = len(actions)
    q_gradients, loss_gradients = [], []
    for i in range(batch_size):
        q = network(states[i : i + 1])[0, actions[i]]
        q_gradients.append([g.double() for g in torch.autograd.grad(q, params)])
        loss = weighted_huber_loss(
            (targets[i] - network(states[i : i + 1])[0, actions[i]]).reshape(1),
            torch.ones(1),
            clip,
        )
        loss_gradients.append([g.double() for g in torch.autograd.grad(loss, params)])
    divisors = []
    for k, param in enumerate(params):
        gradients = torch.stack([g[k] for g in loss_gradients])
        batch_gradient = torch.tensordot(weights.double(), gradients, dims=1) / batch_size
        state = optimizer.state[param]
        grad_avg = decay * state["grad_avg"].double() + (1 - decay) * batch_gradient
        square_avg = decay * state["square_avg"].double() + (1 - decay) * batch_gradient**2
        if optimizer.epsilon_inside:
            divisors.append(torch.sqrt(square_avg - grad_avg**2 + epsilon))
        else:  # torch's RMSprop(centered=True)
            divisors.append(torch.sqrt(square_avg - grad_avg**2) + epsilon)
    shares = [
        [-lr * (g / batch_size) / d for g, d in zip(gs, divisors, strict=True)]
        for gs in loss_gradients
    ]
    sensitivities = torch.stack(
        [norm([g / d for g, d in zip(gs, divisors, strict=True)]) for gs in q_gradients]
    )
    return shares, sensitivities, lr


def norm(vectors) -> torch.Tensor:
    return torch.sqrt(sum((v**2).sum() for v in vectors))


@pytest.mark.parametrize(
    ("network_class", "batch_size", "epsilon_inside"),
    [(TinyQ, 7, True), (TinyQ, 7, False), (NatureQNetwork, 3, True)],
)
def test_norms_match_one_backward_pass_per_transition(network_class, batch_size, epsilon_inside):
    torch.manual_seed(0)
    network = network_class(3) if network_class is TinyQ else network_class(3, 4, (84, 84))
    optimizer = warmed_up(network, seed=1, epsilon_inside=epsilon_inside)
    states, actions, targets, weights = case(network, batch_size, seed=2)
    norms = parameter_change_norms(network, optimizer, states, actions, targets, weights, 1.0)
    shares, sensitivities, lr = reference_shares(
        network, optimizer, states, actions, targets, weights, 1.0
    )
    expected = torch.stack([norm(share) for share in shares]) / (
        lr / batch_size * sensitivities.mean()
    )
    assert norms.shape == (batch_size,) and norms.dtype == torch.float32
    torch.testing.assert_close(norms.double(), expected, rtol=2e-4, atol=0)
    assert (expected > 0).all()


@pytest.mark.parametrize("epsilon_inside", [True, False])
def test_the_shares_sum_to_the_optimizers_step_under_uniform_weights(epsilon_inside):
    torch.manual_seed(3)
    network = TinyQ()
    optimizer = warmed_up(network, seed=4, epsilon_inside=epsilon_inside)
    states, actions, targets, _ = case(network, 5, seed=5)
    weights = torch.ones(5)
    shares, _, _ = reference_shares(network, optimizer, states, actions, targets, weights, 1.0)
    before = [param.detach().clone() for param in network.parameters()]
    q_taken = network(states).gather(1, actions[:, None])[:, 0]
    optimizer.zero_grad()
    weighted_huber_loss(targets - q_taken, weights, 1.0).backward()
    optimizer.step()
    for k, (param, old) in enumerate(zip(network.parameters(), before, strict=True)):
        step = sum(share[k] for share in shares)
        torch.testing.assert_close((param.detach() - old).double(), step, rtol=1e-4, atol=1e-9)


def test_alike_states_give_exactly_the_clipped_td_errors():
    """Every transition has the same state and action, so each moves the network alike per
    unit of error: the norm is min(|δ|, κ), the paper's priority without ε."""
    torch.manual_seed(6)
    network = TinyQ()
    optimizer = warmed_up(network, seed=7)
    states = torch.randint(0, 256, (1, 2, 5, 5), dtype=torch.uint8).expand(4, -1, -1, -1)
    actions = torch.full((4,), 2)
    with torch.no_grad():
        q = network(states[:1])[0, 2]
    targets = q + torch.tensor([0.5, -2.0, 0.25, 0.0])
    weights = torch.tensor([1.0, 0.5, 0.25, 1.0])
    norms = parameter_change_norms(network, optimizer, states, actions, targets, weights, 1.5)
    torch.testing.assert_close(norms, torch.tensor([0.5, 1.5, 0.25, 0.0]), rtol=1e-5, atol=1e-6)


def test_it_changes_neither_the_network_nor_the_optimizer():
    torch.manual_seed(8)
    network = TinyQ()
    optimizer = warmed_up(network, seed=9)
    optimizer.zero_grad(set_to_none=True)
    before = copy.deepcopy((network.state_dict(), optimizer.state_dict()))
    parameter_change_norms(network, optimizer, *case(network, 4, seed=10), 1.0)
    after = (network.state_dict(), optimizer.state_dict())
    for name, value in before[0].items():
        assert torch.equal(after[0][name], value)
    for key, state in before[1]["state"].items():
        for name, value in state.items():
            assert torch.equal(after[1]["state"][key][name], value)
    assert all(param.grad is None for param in network.parameters())


def test_more_than_one_parameter_group_is_refused():
    network = TinyQ()
    optimizer = CenteredRMSProp([network.head.weight], lr=0.01, decay=0.95, epsilon=0.01)
    optimizer.add_param_group({"params": [network.bias]})
    with pytest.raises(ValueError, match="one parameter group"):
        parameter_change_norms(network, optimizer, *case(network, 2, seed=11), 1.0)


def test_learn_returns_the_norms_of_its_own_update_when_asked():
    rng = np.random.default_rng(12)
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(13),
        compute_parameter_change_norms=True,
        frame_shape=(84, 84),
        batch_size=32,
    )
    batch_size = 5
    all_states = rng.integers(0, 256, (2 * batch_size, 4, 84, 84), dtype=np.uint8)
    batch = dataclasses.make_dataclass(
        "Batch", ["all_states", "actions", "rewards", "terminals", "weights"]
    )(
        all_states,
        rng.integers(0, 4, batch_size),
        rng.uniform(-1, 1, batch_size).astype(np.float32),
        np.zeros(batch_size, dtype=np.float32),
        rng.uniform(0.2, 1.0, batch_size).astype(np.float32),
    )
    before = DoubleDQN(  # the agent as it was: the same seed
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(13),
        compute_parameter_change_norms=True,
        frame_shape=(84, 84),
        batch_size=32,
    )
    stats = agent.learn(batch)
    td_errors = torch.from_numpy(stats.td_errors)
    with torch.no_grad():
        q_taken = before.online(torch.from_numpy(all_states[:batch_size]))
        q_taken = q_taken.gather(1, torch.from_numpy(batch.actions)[:, None])[:, 0]
    expected = parameter_change_norms(
        before.online,
        before.optimizer,
        torch.from_numpy(all_states[:batch_size]),
        torch.from_numpy(batch.actions),
        q_taken + td_errors,  # the targets
        torch.from_numpy(batch.weights),
        before.td_error_clip,
    )
    np.testing.assert_allclose(stats.parameter_change_norms, expected.numpy(), rtol=1e-4)
    assert (
        DoubleDQN(
            4,
            AgentSettings(device="cpu"),
            rng=np.random.default_rng(13),
            frame_shape=(84, 84),
            batch_size=32,
        )
        .learn(batch)
        .parameter_change_norms
        is None
    )  # the default path computes none
