"""The learner's CUDA path (captured update, streams, page-locked staging, captured acting)
against its CPU and eager counterparts; skipped without a GPU. Both are float32 (no TF32), but
CUDA's kernels sum in other orders and may be non-deterministic, so results agree to a
tolerance, not bits; a stale graph input, a race on a staging buffer or a missed re-capture
would be far outside it, since every update here learns from a different batch."""

import dataclasses

import numpy as np
import pytest
import torch
from test_double_dqn import assert_freed_on_del, make_agent, random_batch

from agents import acceleration
from agents.acceleration import CapturedCall
from agents.policy import EpsilonGreedy
from replay.buffer import ReplayBuffer
from replay.registry import SAMPLERS
from replay.storage import FrameStorage

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def no_graph_given_up_yet(monkeypatch):
    """Graphs on for every test, whatever gave up in the process before."""
    monkeypatch.setattr(acceleration, "GRAPHS_GIVEN_UP", set())


BATCHES = [random_batch(batch_size=32, seed=seed) for seed in range(7)]
PROBE = random_batch(batch_size=16, seed=99).all_states
CLOSE = {"rtol": 1e-3, "atol": 1e-4}  # across devices
SAME = {"rtol": 1e-5, "atol": 1e-6}  # one device, the same kernels


def assert_parameters_close(first, second, tolerance) -> None:
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), **tolerance)


def greedy(policy: EpsilonGreedy) -> list[int]:
    return [policy.act(state, 0.0) for state in PROBE]


def test_the_cuda_device_is_indexed_so_tensors_compare_equal_to_it():
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


def test_the_captured_cuda_update_equals_the_eager_one_and_is_replayed(capsys):
    captured = make_agent(seed=2, device="cuda", cuda_graphs=True)
    eager = make_agent(seed=2, device="cuda")
    for batch in BATCHES:  # 3 warm-ups, the capture and its check, then replays
        np.testing.assert_allclose(
            captured.learn(batch).td_errors, eager.learn(batch).td_errors, **SAME
        )
    assert_parameters_close(captured.online, eager.online, SAME)
    assert captured.updates.update.enabled  # the check passed: no fallback
    assert capsys.readouterr().err == ""


def test_parameter_change_norms_are_captured_on_cuda_too():
    """The captured norms follow the eager CUDA ones at every update, and the CPU's from the
    same parameters. Later updates are not compared across devices: the devices' parameters
    drift apart by rounding that centered RMSProp's denominator magnifies in the norms (one of
    32 norms by 0.15 % within seven updates on an H100)."""
    captured, eager = (
        make_agent(seed=3, device="cuda", cuda_graphs=graphs, compute_parameter_change_norms=True)
        for graphs in (True, False)
    )
    on_cpu = make_agent(seed=3, compute_parameter_change_norms=True)
    np.testing.assert_allclose(
        captured.learn(BATCHES[0]).parameter_change_norms,
        on_cpu.learn(BATCHES[0]).parameter_change_norms,
        **CLOSE,
    )
    eager.learn(BATCHES[0])
    for batch in BATCHES[1:]:  # warm-ups, the capture and its check, then replays
        np.testing.assert_allclose(
            captured.learn(batch).parameter_change_norms,
            eager.learn(batch).parameter_change_norms,
            **CLOSE,
        )
    assert captured.updates.update.enabled  # the check passed: no fallback


def test_loading_a_state_dict_recaptures_the_cuda_update():
    """After `load_state_dict` the optimizer's state tensors are new ones: a graph captured
    before would go on updating the old ones."""
    source = make_agent(seed=4, device="cuda", cuda_graphs=True)
    loaded = make_agent(seed=5, device="cuda", cuda_graphs=True)
    for batch in BATCHES[:5]:  # both past their capture
        source.learn(batch)
        loaded.learn(batch)
    loaded.load_state_dict(source.state_dict())
    for batch in BATCHES[5:]:
        np.testing.assert_allclose(
            loaded.learn(batch).td_errors, source.learn(batch).td_errors, **SAME
        )
    assert_parameters_close(loaded.online, source.online, SAME)


def test_a_changed_learning_rate_is_not_ignored_by_the_cuda_graph():
    captured = make_agent(seed=6, device="cuda", cuda_graphs=True)
    eager = make_agent(seed=6, device="cuda")
    for index, batch in enumerate(BATCHES + BATCHES):
        if index == len(BATCHES):
            for agent in (captured, eager):
                agent.optimizer.param_groups[0]["lr"] *= 10
        np.testing.assert_allclose(
            captured.learn(batch).td_errors, eager.learn(batch).td_errors, **SAME
        )
    assert_parameters_close(captured.online, eager.online, SAME)


@pytest.mark.parametrize("graphs", [True, False])
def test_cuda_acting_is_the_networks_argmax(graphs):
    agent = make_agent(seed=6, device="cuda", cuda_graphs=graphs)
    for batch in BATCHES[:4]:  # acting between updates sees each update's parameters
        agent.learn(batch)
        with torch.no_grad():
            q = agent.online(torch.from_numpy(PROBE).to(agent.device))
        assert greedy(agent.policy) == q.argmax(1).tolist()


def test_pipelined_cuda_acting_uses_the_parameters_from_before_the_update_in_flight():
    pipelined = make_agent(seed=7, device="cuda", pipelined=True, cuda_graphs=True)
    exact = make_agent(seed=7, device="cuda")
    before = greedy(exact.policy)
    for batch in BATCHES:
        pending = pipelined.start_learning(batch)
        assert greedy(pipelined.policy) == before
        np.testing.assert_allclose(pending.result().td_errors, exact.learn(batch).td_errors, **SAME)
        before = greedy(exact.policy)
        assert greedy(pipelined.online_policy()) == before
    assert_parameters_close(pipelined.online, exact.online, SAME)


def test_a_pipelined_cuda_agents_state_dict_keeps_the_acting_copy():
    agent, batch = make_agent(seed=2, device="cuda", pipelined=True), BATCHES[0]
    agent.learn(batch)
    agent.start_learning(batch)  # in flight: state_dict waits for it
    state = agent.state_dict()
    restored = make_agent(seed=3, device="cuda", pipelined=True)
    restored.load_state_dict(state)
    probe = torch.from_numpy(PROBE).to(agent.device)
    behaviour = (agent.updates.behaviour, restored.updates.behaviour)
    with torch.no_grad():
        for first, second in ((agent.online, restored.online), behaviour):
            assert torch.equal(first(probe), second(probe))
        assert not torch.equal(agent.online(probe), agent.updates.behaviour(probe))
    exact = make_agent(seed=3, device="cuda")
    exact.load_state_dict(state)  # an exact agent ignores the copy
    with torch.no_grad():
        assert torch.equal(exact.online(probe), agent.online(probe))


def test_states_already_on_the_cuda_device_give_the_same_update():
    from_host = make_agent(seed=8, device="cuda", cuda_graphs=True)
    on_device = make_agent(seed=8, device="cuda", cuda_graphs=True)
    for batch in BATCHES:
        expected = from_host.learn(batch)
        states = torch.from_numpy(batch.all_states).to(on_device.device)
        moved = dataclasses.replace(batch, all_states=states)
        np.testing.assert_allclose(on_device.learn(moved).td_errors, expected.td_errors, **SAME)


def test_states_gathered_into_page_locked_memory_give_the_same_update():
    """A replay built for a CUDA learner gathers its states into page-locked memory, which
    the update copies to the device from where it is."""
    rng = np.random.default_rng(10)
    replay = ReplayBuffer(
        FrameStorage(64, 4, (84, 84)),
        SAMPLERS["uniform"](64, rng),
        32,
        td_error_clip=1.0,
        pin_memory=True,
    )
    replay.start_episode(rng.integers(0, 256, (84, 84), dtype=np.uint8))
    for _ in range(63):
        replay.add(int(rng.integers(4)), 0.0, False, rng.integers(0, 256, (84, 84), np.uint8))
    locked, plain = make_agent(seed=10, device="cuda"), make_agent(seed=10, device="cuda")
    for _ in range(3):
        batch = replay.sample(1.0)
        assert torch.from_numpy(batch.all_states).is_pinned()
        copied = dataclasses.replace(batch, all_states=batch.all_states.copy())
        np.testing.assert_allclose(
            locked.learn(batch).td_errors, plain.learn(copied).td_errors, **SAME
        )
    assert_parameters_close(locked.online, plain.online, SAME)


def test_a_real_cuda_capture_that_fails_falls_back_to_the_eager_call(capsys):
    """Reading a value on the host is forbidden while a stream is being captured: the call
    warns once, naming that (not the invalidated capture that ending it then reports), stays
    eager, and leaves the caller's stream current."""
    values = torch.arange(4.0, device="cuda")

    def total_on_the_host(tensor):
        return tensor * float(tensor.sum().item())

    call = CapturedCall(total_on_the_host, name="a sum", enabled=True, device=values.device)
    caller = torch.cuda.current_stream()
    results = [call(values).tolist() for _ in range(5)]
    assert results == [[0.0, 6.0, 12.0, 18.0]] * 5
    assert not call.enabled
    assert torch.cuda.current_stream() == caller  # not the failed capture's stream
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: the CUDA graph of a sum failed (")
    assert "operation not permitted when stream is capturing" in line
    assert "previous error during capture" not in line
    assert line.endswith("): continuing without CUDA graphs")


def test_a_cuda_learner_and_its_graphs_are_freed_on_del():
    def build():
        agent = make_agent(seed=9, device="cuda", cuda_graphs=True, pipelined=True)
        for batch in BATCHES:
            agent.learn(batch)
            greedy(agent.policy)
        return agent

    assert_freed_on_del(build)
