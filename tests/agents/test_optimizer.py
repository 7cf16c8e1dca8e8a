"""The learner's centered RMSProp (`centered_rmsprop` on a CenteredRMSProp's statistics) against
a numpy re-implementation of DeepMind's rule, and versus torch's."""

import io

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from agents.networks import MinAtarQNetwork, NatureQNetwork
from agents.optimizer import CenteredRMSProp, centered_rmsprop


class SteppedRMSProp(CenteredRMSProp):
    """A CenteredRMSProp that steps as a torch optimizer: `centered_rmsprop`, which the learner
    applies, over the parameters that have a gradient (the learner's optimizer has no `step`)."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else torch.enable_grad()(closure)()
        for group in self.param_groups:
            params = [param for param in group["params"] if param.grad is not None]
            if params:  # foreach ops reject empty lists
                state = (*self.statistics(params), group, self.epsilon_inside)
                centered_rmsprop(params, [param.grad for param in params], *state)
        return loss


INITIAL = np.array([0.5, -1.0, 2.0, 0.0])
GRADIENTS = np.array(
    [
        [0.1, -0.2, 0.3, 0.0],
        [0.05, 0.0, -0.3, 1.0],
        [-0.4, 0.25, 0.3, 2.0],
        [0.0, -0.1, 0.2, -0.5],
        [0.3, 0.3, -0.6, 0.125],
    ]
)


def numpy_centered_rmsprop(lr, decay, epsilon, epsilon_inside_sqrt):
    """Reference trajectory; epsilon_inside_sqrt=False is torch's RMSprop(centered=True)."""
    theta, g, g2, trajectory = INITIAL.copy(), np.zeros(4), np.zeros(4), []
    for grad in GRADIENTS:
        g = decay * g + (1 - decay) * grad
        g2 = decay * g2 + (1 - decay) * grad**2
        if epsilon_inside_sqrt:
            theta = theta - lr * grad / np.sqrt(g2 - g**2 + epsilon)
        else:
            theta = theta - lr * grad / (np.sqrt(g2 - g**2) + epsilon)
        trajectory.append(theta.copy())
    return trajectory


def run_torch(make_optimizer, dtype=torch.float64):
    param = torch.nn.Parameter(torch.tensor(INITIAL, dtype=dtype))
    optimizer, trajectory = make_optimizer([param]), []
    for grad in GRADIENTS:
        param.grad = torch.tensor(grad, dtype=dtype)
        optimizer.step()
        trajectory.append(param.detach().numpy().astype(np.float64).copy())
    return trajectory


@pytest.mark.parametrize(("lr", "decay", "epsilon"), [(0.1, 0.95, 0.01), (0.02, 0.9, 1e-4)])
def test_matches_deepmind_rule_step_by_step(lr, decay, epsilon):
    expected = numpy_centered_rmsprop(lr, decay, epsilon, epsilon_inside_sqrt=True)
    actual = run_torch(lambda p: SteppedRMSProp(p, lr=lr, decay=decay, epsilon=epsilon))
    for step, (a, e) in enumerate(zip(actual, expected, strict=True)):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=0, err_msg=f"step {step}")


def test_float32_parameter_matches_reference():
    expected = numpy_centered_rmsprop(0.1, 0.95, 0.01, epsilon_inside_sqrt=True)
    actual = run_torch(
        lambda p: SteppedRMSProp(p, lr=0.1, epsilon=0.01, decay=0.95), dtype=torch.float32
    )
    np.testing.assert_allclose(actual[-1], expected[-1], rtol=1e-5, atol=1e-7)


def test_differs_from_torch_centered_rmsprop_only_by_epsilon_placement():
    """Why this class exists: torch adds epsilon OUTSIDE the square root."""
    ours = run_torch(lambda p: SteppedRMSProp(p, lr=0.1, decay=0.95, epsilon=0.01))
    torchs = run_torch(
        lambda p: torch.optim.RMSprop(p, lr=0.1, alpha=0.95, eps=0.01, centered=True)
    )
    torch_reference = numpy_centered_rmsprop(0.1, 0.95, 0.01, epsilon_inside_sqrt=False)
    np.testing.assert_allclose(torchs[-1], torch_reference[-1], rtol=1e-6)
    assert np.abs(ours[0] - torchs[0]).max() > 0.05  # already the first step differs a lot
    # With epsilon -> 0 the two rules coincide (checked on steps where g2 - g**2 > 0).
    tiny_ours = run_torch(lambda p: SteppedRMSProp(p, lr=0.1, epsilon=1e-30, decay=0.95))
    tiny_torch = run_torch(
        lambda p: torch.optim.RMSprop(p, lr=0.1, alpha=0.95, eps=1e-30, centered=True)
    )
    np.testing.assert_allclose(tiny_ours[-1], tiny_torch[-1], rtol=1e-9)


def test_gradients_scaled_by_c_with_epsilon_scaled_by_c_squared_give_the_same_update():
    """Why DoubleDQN's default is 0.01 / 32**2: DeepMind summed the loss over 32 transitions
    (gradients 32x ours, a mean) with epsilon 0.01 inside the square root."""
    summed, mean = (torch.nn.Parameter(torch.tensor(INITIAL)) for _ in range(2))
    summed_optimizer = SteppedRMSProp([summed], lr=0.1, epsilon=0.01, decay=0.95)
    mean_optimizer = SteppedRMSProp([mean], lr=0.1, decay=0.95, epsilon=0.01 / 32**2)
    for grad in GRADIENTS:
        summed.grad, mean.grad = torch.tensor(32 * grad), torch.tensor(grad)
        summed_optimizer.step()
        mean_optimizer.step()
    torch.testing.assert_close(summed, mean, rtol=1e-12, atol=0)


def test_state_dict_round_trip_continues_identically():
    def make(param):
        return SteppedRMSProp([param], lr=0.1, decay=0.95, epsilon=0.01)

    first = torch.nn.Parameter(torch.tensor(INITIAL))
    optimizer = make(first)
    for grad in GRADIENTS[:2]:
        first.grad = torch.tensor(grad)
        optimizer.step()
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    second = torch.nn.Parameter(first.detach().clone())
    restored = make(second)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    for grad in GRADIENTS[2:]:
        for param, opt in ((first, optimizer), (second, restored)):
            param.grad = torch.tensor(grad)
            opt.step()
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_a_state_dict_loaded_in_memory_is_copied_not_shared():
    """Two optimizers, one loaded from the other's live state dict, step independently."""
    first = torch.nn.Parameter(torch.tensor(INITIAL))
    optimizer = SteppedRMSProp([first], lr=0.1, decay=0.95, epsilon=0.01)
    first.grad = torch.tensor(GRADIENTS[0])
    optimizer.step()
    second = torch.nn.Parameter(first.detach().clone())
    restored = SteppedRMSProp([second], lr=0.1, decay=0.95, epsilon=0.01)
    restored.load_state_dict(optimizer.state_dict())
    before = {key: value.clone() for key, value in restored.state[second].items()}
    first.grad = torch.tensor(GRADIENTS[1])
    optimizer.step()
    for key, value in before.items():
        torch.testing.assert_close(restored.state[second][key], value, rtol=0, atol=0)


def test_parameters_without_gradient_are_untouched_and_closure_is_returned():
    used, unused = (torch.nn.Parameter(torch.ones(2)) for _ in range(2))
    optimizer = SteppedRMSProp([used, unused], lr=0.1, decay=0.95, epsilon=0.01)

    def closure():
        optimizer.zero_grad()
        loss = (used * torch.tensor([1.0, -2.0])).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == pytest.approx(-1.0)
    assert unused.grad is None
    assert torch.equal(unused.detach(), torch.ones(2))
    assert used[0] < 1.0 < used[1]


class PerParameterCenteredRMSProp(torch.optim.Optimizer):
    """CenteredRMSProp as it was before its foreach step: a loop over parameters, g and g2
    allocated on a parameter's first gradient. The bit-identity reference, and the writer of
    state dicts in the old checkpoints' format."""

    def __init__(self, params, lr, decay=0.95, epsilon=0.01):
        super().__init__(params, {"lr": lr, "decay": decay, "epsilon": epsilon})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, decay, epsilon = group["lr"], group["decay"], group["epsilon"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad, state = param.grad, self.state[param]
                if not state:
                    state["grad_avg"] = torch.zeros_like(param)
                    state["square_avg"] = torch.zeros_like(param)
                grad_avg, square_avg = state["grad_avg"], state["square_avg"]
                grad_avg.mul_(decay).add_(grad, alpha=1.0 - decay)
                square_avg.mul_(decay).addcmul_(grad, grad, value=1.0 - decay)
                variance = square_avg.addcmul(grad_avg, grad_avg, value=-1.0)
                param.addcdiv_(grad, variance.add_(epsilon).sqrt_(), value=-lr)


# DoubleDQN's values (ε = 0.01 / 32², gradients of a mean loss) and DeepMind's (summed loss).
HYPERPARAMETERS = [
    {"lr": 0.00025, "decay": 0.95, "epsilon": 0.01 / 32**2},
    {"lr": 0.1, "decay": 0.9, "epsilon": 0.01},
]


def nature_cnn_parameters():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        network = NatureQNetwork(6, 4, (84, 84))
    return [torch.nn.Parameter(param.detach().clone()) for param in network.parameters()]


def random_gradients(params, step, only=None):
    """Gradients over four orders of magnitude (some below, some above sqrt(ε)), so that
    both the variance and ε dominate the denominator somewhere; `only` picks which get one."""
    generator = torch.Generator().manual_seed(1000 + step)
    scale = 10.0 ** torch.empty(1).uniform_(-4, 0, generator=generator).item()
    return [
        scale * torch.randn(param.shape, generator=generator)
        if only is None or index in only
        else None
        for index, param in enumerate(params)
    ]


def copy_of(params):
    return [torch.nn.Parameter(param.detach().clone()) for param in params]


def run_steps(pairs, steps, only=None):
    """Step each (params, optimizer) on the same gradients, checking after every step that
    parameters and state agree bit for bit."""
    for step in steps:
        gradients = random_gradients(pairs[0][0], step, only)
        for params, optimizer in pairs:
            for param, gradient in zip(params, gradients, strict=True):
                param.grad = gradient  # the optimizer only reads it
            optimizer.step()
        assert_bit_identical(*pairs)


def assert_bit_identical(*pairs):
    (params, optimizer), others = pairs[0], pairs[1:]
    for other_params, other_optimizer in others:
        for a, b in zip(params, other_params, strict=True):
            assert torch.equal(a, b)
            for key in optimizer.state[a]:
                assert torch.equal(optimizer.state[a][key], other_optimizer.state[b][key]), key


def save_and_load(state_dict):
    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("hyperparameters", HYPERPARAMETERS)
def test_foreach_step_is_bit_identical_to_the_per_parameter_rule(hyperparameters):
    reference = nature_cnn_parameters()
    params = copy_of(reference)
    run_steps(
        [
            (reference, PerParameterCenteredRMSProp(reference, **hyperparameters)),
            (params, SteppedRMSProp(params, **hyperparameters)),
        ],
        range(30),
    )


@pytest.mark.parametrize("hyperparameters", HYPERPARAMETERS)
def test_foreach_step_stays_bit_identical_after_a_state_dict_round_trip(hyperparameters):
    reference, params = nature_cnn_parameters(), nature_cnn_parameters()
    reference_pair = (reference, PerParameterCenteredRMSProp(reference, **hyperparameters))
    pair = (params, SteppedRMSProp(params, **hyperparameters))
    run_steps([reference_pair, pair], range(15))
    restored = copy_of(params)
    restored_optimizer = SteppedRMSProp(restored, **hyperparameters)
    restored_optimizer.load_state_dict(save_and_load(pair[1].state_dict()))
    run_steps([reference_pair, pair, (restored, restored_optimizer)], range(15, 30))


@pytest.mark.parametrize("steps_before", [0, 10])
def test_state_dicts_in_the_old_format_continue_bit_identically(steps_before):
    """The old rule allocated g and g2 on a parameter's first gradient: its state dict holds
    nothing for a parameter that never had one (here the odd-numbered ones), or at all."""
    hyperparameters = HYPERPARAMETERS[0]
    old = nature_cnn_parameters()
    old_pair = (old, PerParameterCenteredRMSProp(old, **hyperparameters))
    evens = set(range(0, len(old), 2))
    run_steps([old_pair], range(steps_before), only=evens)
    old_state = save_and_load(old_pair[1].state_dict())
    assert len(old_state["state"]) == (len(evens) if steps_before else 0)
    params = copy_of(old)
    optimizer = SteppedRMSProp(params, **hyperparameters)
    optimizer.load_state_dict(old_state)
    run_steps([old_pair, (params, optimizer)], range(steps_before, steps_before + 20))


def test_state_exists_before_the_first_step_and_step_keeps_its_tensors():
    """What CUDA graph capture needs: a step writes into the state it finds, allocating none,
    also after loading a state dict that lacks some (an unused optimizer's)."""
    params = nature_cnn_parameters()
    optimizer = SteppedRMSProp(params, lr=0.1, decay=0.95, epsilon=0.01)
    optimizer.load_state_dict(PerParameterCenteredRMSProp(params, lr=0.1).state_dict())
    state = state_tensors(optimizer, params)
    assert len(state) == 2 * len(params) and not any(torch.count_nonzero(t) for t in state)
    run_steps([(params, optimizer)], range(1))
    assert [t.data_ptr() for t in state_tensors(optimizer, params)] == [t.data_ptr() for t in state]
    assert all(torch.count_nonzero(t) for t in state)


def state_tensors(optimizer, params):
    return [optimizer.state[param][key] for param in params for key in ("grad_avg", "square_avg")]


def test_a_step_is_eight_foreach_operations_whatever_the_number_of_parameters():
    params = nature_cnn_parameters()
    optimizer = SteppedRMSProp(params, lr=0.1, decay=0.95, epsilon=0.01)
    for param, gradient in zip(params, random_gradients(params, step=0), strict=True):
        param.grad = gradient
    with OperatorCounter() as counter:
        optimizer.step()
    aten = [name for name in counter.operators if name.startswith("aten::")]  # not profiler's
    assert len(aten) == 8 and all(name.startswith("aten::_foreach_") for name in aten)


class OperatorCounter(TorchDispatchMode):
    """Records the ATen operators a block dispatches (a foreach op counts once)."""

    def __init__(self):
        super().__init__()
        self.operators = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.operators.append(func._schema.name)
        return func(*args, **(kwargs or {}))


def test_epsilon_outside_is_torchs_centered_rmsprop_bit_for_bit():
    """`epsilon_inside=False` (agent.optimizer=torch_rmsprop) takes torch's steps in torch's
    order, so a network trained with either has the same bits."""
    ours = run_torch(
        lambda p: SteppedRMSProp(p, lr=0.1, decay=0.95, epsilon=0.01, epsilon_inside=False)
    )
    torchs = run_torch(
        lambda p: torch.optim.RMSprop(p, lr=0.1, alpha=0.95, eps=0.01, centered=True)
    )
    for mine, theirs in zip(ours, torchs, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    networks = []
    for make in (
        lambda p: SteppedRMSProp(p, lr=2.5e-4, epsilon=0.01, epsilon_inside=False, decay=0.95),
        lambda p: torch.optim.RMSprop(p, lr=2.5e-4, alpha=0.95, eps=0.01, centered=True),
    ):
        torch.manual_seed(0)
        network = MinAtarQNetwork(6, 1, (4, 10, 10))
        optimizer, generator = make(network.parameters()), torch.Generator().manual_seed(1)
        for _ in range(20):
            states = (torch.rand((32, 1, 4, 10, 10), generator=generator) < 0.1).byte()
            optimizer.zero_grad()
            network(states).square().mean().backward()
            optimizer.step()
        networks.append(network)
    for mine, theirs in zip(*(n.parameters() for n in networks), strict=True):
        assert torch.equal(mine, theirs)
