"""The learner's CUDA path (captured update, streams, page-locked staging, captured acting)
against its CPU and eager counterparts; skipped without a GPU. Both are float32 (no TF32), but
CUDA's kernels sum in other orders and may be non-deterministic, so results agree to a
tolerance, not bits; a stale graph input, a race on a staging buffer or a missed re-capture
would be far outside it, since every update here learns from a different batch."""

import dataclasses

import numpy as np
import pytest
import torch
from test_double_dqn import make_agent, random_batch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

BATCHES = [random_batch(batch_size=32, seed=seed) for seed in range(7)]
PROBE = random_batch(batch_size=16, seed=99).all_states
CLOSE = {"rtol": 1e-3, "atol": 1e-4}  # across devices
SAME = {"rtol": 1e-5, "atol": 1e-6}  # one device, the same kernels


def assert_parameters_close(first, second, tolerance) -> None:
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), **tolerance)


def test_the_device_is_indexed_so_tensors_compare_equal_to_it():
    agent = make_agent(device="cuda")
    assert agent.device.index is not None
    assert next(agent.online.parameters()).device == agent.device
    assert not torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("graphs", [True, False])
def test_updates_on_cuda_follow_the_cpu_updates(graphs):
    on_cpu, on_cuda = make_agent(seed=1), make_agent(seed=1, device="cuda", cuda_graphs=graphs)
    for batch in BATCHES:
        expected, stats = on_cpu.learn(batch), on_cuda.learn(batch)
        np.testing.assert_allclose(stats.td_errors, expected.td_errors, **CLOSE)
        assert stats.loss == pytest.approx(expected.loss, rel=CLOSE["rtol"], abs=CLOSE["atol"])
    assert_parameters_close(on_cpu.online, on_cuda.online, CLOSE)


def test_the_captured_update_equals_the_eager_one():
    captured = make_agent(seed=2, device="cuda")
    eager = make_agent(seed=2, device="cuda", cuda_graphs=False)
    for batch in BATCHES:  # 3 warm-ups, the capture, then replays with new inputs
        np.testing.assert_allclose(
            captured.learn(batch).td_errors, eager.learn(batch).td_errors, **SAME
        )
    assert_parameters_close(captured.online, eager.online, SAME)


def test_parameter_change_norms_are_captured_too():
    captured = make_agent(seed=3, device="cuda", compute_parameter_change_norms=True)
    on_cpu = make_agent(seed=3, compute_parameter_change_norms=True)
    for batch in BATCHES:
        norms, expected = captured.learn(batch), on_cpu.learn(batch)
        np.testing.assert_allclose(
            norms.parameter_change_norms, expected.parameter_change_norms, **CLOSE
        )


def test_loading_a_state_dict_recaptures_the_update():
    """After `load_state_dict` the optimizer's state tensors are new ones: a graph captured
    before would go on updating the old ones."""
    source = make_agent(seed=4, device="cuda")
    loaded = make_agent(seed=5, device="cuda")
    for batch in BATCHES[:4]:  # both past their capture
        source.learn(batch)
        loaded.learn(batch)
    loaded.load_state_dict(source.state_dict())
    for batch in BATCHES[4:]:
        np.testing.assert_allclose(
            loaded.learn(batch).td_errors, source.learn(batch).td_errors, **SAME
        )
    assert_parameters_close(loaded.online, source.online, SAME)


def test_captured_acting_is_the_networks_argmax():
    agent = make_agent(seed=6, device="cuda")
    for batch in BATCHES[:4]:  # acting between updates sees each update's parameters
        agent.learn(batch)
        with torch.no_grad():
            q = agent.online(torch.from_numpy(PROBE).to(agent.device))
        assert [agent.act(state, 0.0) for state in PROBE] == q.argmax(1).tolist()


def test_pipelined_acting_uses_the_parameters_from_before_the_update_in_flight():
    pipelined = make_agent(seed=7, device="cuda", pipelined=True)
    exact = make_agent(seed=7, device="cuda")
    before = [exact.act(state, 0.0) for state in PROBE]
    for batch in BATCHES:
        pending = pipelined.start_learning(batch)
        assert [pipelined.explore(state, 0.0) for state in PROBE] == before
        np.testing.assert_allclose(pending.result().td_errors, exact.learn(batch).td_errors, **SAME)
        before = [exact.act(state, 0.0) for state in PROBE]
    assert_parameters_close(pipelined.online, exact.online, SAME)


def test_states_already_on_the_device_give_the_same_update():
    from_host = make_agent(seed=8, device="cuda")
    on_device = make_agent(seed=8, device="cuda")
    for batch in BATCHES:
        expected = from_host.learn(batch)
        states = torch.from_numpy(batch.all_states).to(on_device.device)
        moved = dataclasses.replace(batch, all_states=states)
        np.testing.assert_allclose(on_device.learn(moved).td_errors, expected.td_errors, **SAME)
