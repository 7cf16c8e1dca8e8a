"""CenteredRMSProp against a numpy re-implementation of DeepMind's rule, and versus torch's."""

import io

import numpy as np
import pytest
import torch

from agents import CenteredRMSProp

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
    actual = run_torch(lambda p: CenteredRMSProp(p, lr=lr, decay=decay, epsilon=epsilon))
    for step, (a, e) in enumerate(zip(actual, expected, strict=True)):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=0, err_msg=f"step {step}")


def test_float32_parameter_matches_reference():
    expected = numpy_centered_rmsprop(0.1, 0.95, 0.01, epsilon_inside_sqrt=True)
    actual = run_torch(lambda p: CenteredRMSProp(p, lr=0.1, epsilon=0.01), dtype=torch.float32)
    np.testing.assert_allclose(actual[-1], expected[-1], rtol=1e-5, atol=1e-7)


def test_differs_from_torch_centered_rmsprop_only_by_epsilon_placement():
    """Why this class exists: torch adds epsilon OUTSIDE the square root."""
    ours = run_torch(lambda p: CenteredRMSProp(p, lr=0.1, decay=0.95, epsilon=0.01))
    torchs = run_torch(
        lambda p: torch.optim.RMSprop(p, lr=0.1, alpha=0.95, eps=0.01, centered=True)
    )
    torch_reference = numpy_centered_rmsprop(0.1, 0.95, 0.01, epsilon_inside_sqrt=False)
    np.testing.assert_allclose(torchs[-1], torch_reference[-1], rtol=1e-6)
    assert np.abs(ours[0] - torchs[0]).max() > 0.05  # already the first step differs a lot
    # With epsilon -> 0 the two rules coincide (checked on steps where g2 - g**2 > 0).
    tiny_ours = run_torch(lambda p: CenteredRMSProp(p, lr=0.1, epsilon=1e-30))
    tiny_torch = run_torch(
        lambda p: torch.optim.RMSprop(p, lr=0.1, alpha=0.95, eps=1e-30, centered=True)
    )
    np.testing.assert_allclose(tiny_ours[-1], tiny_torch[-1], rtol=1e-9)


def test_gradients_scaled_by_c_with_epsilon_scaled_by_c_squared_give_the_same_update():
    """Why DoubleDQN's default is 0.01 / 32**2: DeepMind summed the loss over 32 transitions
    (gradients 32x ours, a mean) with epsilon 0.01 inside the square root."""
    summed, mean = (torch.nn.Parameter(torch.tensor(INITIAL)) for _ in range(2))
    summed_optimizer = CenteredRMSProp([summed], lr=0.1, epsilon=0.01)
    mean_optimizer = CenteredRMSProp([mean], lr=0.1, epsilon=0.01 / 32**2)
    for grad in GRADIENTS:
        summed.grad, mean.grad = torch.tensor(32 * grad), torch.tensor(grad)
        summed_optimizer.step()
        mean_optimizer.step()
    torch.testing.assert_close(summed, mean, rtol=1e-12, atol=0)


def test_state_dict_round_trip_continues_identically():
    def make(param):
        return CenteredRMSProp([param], lr=0.1, decay=0.95, epsilon=0.01)

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


def test_parameters_without_gradient_are_untouched_and_closure_is_returned():
    used, unused = (torch.nn.Parameter(torch.ones(2)) for _ in range(2))
    optimizer = CenteredRMSProp([used, unused], lr=0.1)

    def closure():
        optimizer.zero_grad()
        loss = (used * torch.tensor([1.0, -2.0])).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == pytest.approx(-1.0)
    assert unused.grad is None
    assert torch.equal(unused.detach(), torch.ones(2))
    assert used[0] < 1.0 < used[1]


@pytest.mark.parametrize(
    "kwargs", [{"lr": -1.0}, {"lr": 0.1, "decay": 1.0}, {"lr": 0.1, "epsilon": 0.0}]
)
def test_rejects_invalid_hyperparameters(kwargs):
    with pytest.raises(ValueError, match="need lr >= 0"):
        CenteredRMSProp([torch.nn.Parameter(torch.ones(1))], **kwargs)
