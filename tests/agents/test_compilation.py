"""agent.torch_compile: the compiled update computes the eager update's arithmetic, and a
compiler that fails leaves one warning line and the eager update."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from launch.validation import validate_config
from tests.test_train import config

MINATAR = {
    "network": "minatar",
    "history_length": 1,
    "optimizer": "torch_rmsprop",
    "discount": 0.99,
}
FRAMES = (4, 10, 10)
BATCH_SIZE = 8


def learner(torch_compile: bool, **settings) -> DoubleDQN:
    settings = {**MINATAR, **settings}
    return DoubleDQN(
        6,
        AgentSettings(device="cpu", torch_compile=torch_compile, **settings),
        rng=np.random.default_rng(0),
        frame_shape=FRAMES,
        batch_size=BATCH_SIZE,
    )


def batches(count: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield SimpleNamespace(
            all_states=(rng.random((2 * BATCH_SIZE, 1, *FRAMES)) < 0.2).astype(np.uint8),
            actions=rng.integers(6, size=BATCH_SIZE).astype(np.int64),
            rewards=rng.normal(size=BATCH_SIZE).astype(np.float32),
            terminals=(rng.random(BATCH_SIZE) < 0.2).astype(np.float32),
            weights=rng.random(BATCH_SIZE).astype(np.float32),
        )


def parameters(agent: DoubleDQN) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in agent.online.parameters()])


@pytest.mark.parametrize(
    "settings",
    [
        {"target_rule": "dqn", "optimizer": "torch_rmsprop"},
        {"target_rule": "double_dqn", "optimizer": "deepmind_rmsprop"},
    ],
    ids=["dqn, torch's rmsprop", "double dqn, deepmind's rmsprop"],
)
def test_the_compiled_update_is_the_eager_update_up_to_rounding(settings):
    eager, compiled = learner(False, **settings), learner(True, **settings)
    for batch in batches(20):
        expected, got = eager.learn(batch), compiled.learn(batch)
        np.testing.assert_allclose(got.td_errors, expected.td_errors, rtol=1e-4, atol=1e-5)
        assert got.loss == pytest.approx(expected.loss, rel=1e-4, abs=1e-6)
        assert got.mean_q == pytest.approx(expected.mean_q, rel=1e-4, abs=1e-6)
    assert compiled.compile_failure is None  # compiled indeed, not eager after a failure
    torch.testing.assert_close(parameters(compiled), parameters(eager), rtol=1e-4, atol=1e-6)
    statistics = [compiled.optimizer.state, eager.optimizer.state]
    for ours, theirs in zip(*(state.values() for state in statistics), strict=True):
        torch.testing.assert_close(ours["square_avg"], theirs["square_avg"], rtol=1e-3, atol=1e-9)
    # Something changed: the comparison is not of two untouched networks.
    assert not torch.equal(parameters(compiled), parameters(learner(False)))


def test_a_compiler_that_fails_leaves_one_warning_and_the_eager_update(monkeypatch, capsys):
    def failing_compile(function, **options):
        def compiled(*args):
            raise RuntimeError("no C++ compiler found\nmore detail")

        return compiled

    monkeypatch.setattr(torch, "compile", failing_compile)
    eager, compiled = learner(False), learner(True)
    for batch in batches(3):
        expected, got = eager.learn(batch), compiled.learn(batch)
        np.testing.assert_array_equal(got.td_errors, expected.td_errors)
    assert torch.equal(parameters(compiled), parameters(eager))
    assert capsys.readouterr().err == (
        "warning: torch.compile of the update failed (RuntimeError: no C++ compiler found); "
        "continuing without torch.compile\n"
    )


def test_torch_compile_is_refused_with_cuda_graphs_and_with_per_sample_gradients():
    """Both refusals come from the settings, in one line, before a run builds anything."""
    with pytest.raises(ValueError, match=r"^agent\.torch_compile=true is not allowed"):
        AgentSettings(torch_compile=True, cuda_graphs=True)
    per_sample = config("agent.torch_compile=true", "replay.priority_signal=parameter_change")
    with pytest.raises(ValueError, match=r"agent\.torch_compile=true is not allowed") as error:
        validate_config(per_sample)
    assert "\n" not in str(error.value)
