"""DoubleDQN: exact Double-Q targets, weighted Huber loss and its gradient, target sync,
checkpoints, device resolution, host staging, its release on `del`, and a learning sanity
check."""

import dataclasses
import gc
import io
import weakref
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

from agents.acceleration import PinnedStaging
from agents.double_dqn import DoubleDQN, optimizer_epsilon
from agents.optimizer import CenteredRMSProp, centered_rmsprop
from agents.policy import resolve_device
from agents.settings import AgentSettings
from agents.targets import double_q_targets, dqn_targets, weighted_huber_loss
from agents.updates import LearnStats

NO_GPU = not torch.cuda.is_available()


@dataclass
class FakeBatch:
    """Stand-in for the replay's batch: the same numpy fields, dtypes and layout."""

    all_states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    weights: np.ndarray

    @property
    def states(self) -> np.ndarray:
        return self.all_states[: len(self.actions)]

    @property
    def next_states(self) -> np.ndarray:
        return self.all_states[len(self.actions) :]


def id_batch(state_ids, next_ids, actions, rewards, terminals, weights) -> FakeBatch:
    """Every frame of state i is filled with the byte i, so LookupQ can identify it."""
    ids = np.array(list(state_ids) + list(next_ids), dtype=np.uint8)
    all_states = np.broadcast_to(ids[:, None, None, None], (len(ids), 4, 84, 84)).copy()
    return FakeBatch(
        all_states,
        np.array(actions, np.int64),
        np.array(rewards, np.float32),
        np.array(terminals, np.float32),
        np.array(weights, np.float32),
    )


def random_batch(batch_size=8, num_actions=4, seed=0) -> FakeBatch:
    rng = np.random.default_rng(seed)
    return FakeBatch(
        rng.integers(0, 256, (2 * batch_size, 4, 84, 84), dtype=np.uint8),
        rng.integers(0, num_actions, batch_size),
        rng.uniform(-1, 1, batch_size).astype(np.float32),
        (rng.random(batch_size) < 0.25).astype(np.float32),
        rng.uniform(0.2, 1.0, batch_size).astype(np.float32),
    )


class LookupQ(nn.Module):
    """Q(s, ·) = table[s], where s is the byte stored in the state's frames."""

    def __init__(self, rows):
        super().__init__()
        self.table = nn.Parameter(torch.tensor(rows, dtype=torch.float32))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.table[frames[:, 0, 0, 0].long()]


def make_agent(
    seed=0,
    num_actions=4,
    device="cpu",
    frame_shape=(84, 84),
    batch_size=32,
    compute_parameter_change_norms=False,
    **settings,
) -> DoubleDQN:
    return DoubleDQN(
        num_actions,
        AgentSettings(device=device, **settings),
        rng=np.random.default_rng(seed),
        frame_shape=frame_shape,
        batch_size=batch_size,
        compute_parameter_change_norms=compute_parameter_change_norms,
    )


# Hand-built case, 3 actions, discount 0.5. Rows 0-3 are S_j, rows 4-7 are S_{j+1}. The online
# and target nets disagree on S': plain DQN (max of target) or evaluating the online argmax
# with the online net would both give other targets than Double DQN.
ONLINE = [
    [1, 2, 3],
    [0.5, 0.25, 0],
    [2, 2, 2],
    [0, 0, -1.25],
    [1, 5, 2],
    [3, 0, 0],
    [0, 0, 1],
    [0, 2, 1],
]
TARGET = [[0, 0, 0]] * 4 + [[10, 3, 7], [2, 6, 0], [9, 9, 9], [0, -4, 8]]
ACTIONS, REWARDS = [0, 1, 2, 2], [1, 0, -1, 0.5]
TERMINALS, WEIGHTS = [0, 0, 1, 0], [1, 0.5, 0.25, 2]
# y = r + 0.5 (1 - t) Q_target(S', argmax Q_online(S')) = [2.5, 1, -1, -1.5]; Q(S,A) below.
Q_TAKEN = [1, 0.25, 2, -1.25]
EXPECTED_TD = [1.5, 0.75, -3.0, -0.25]
# Huber_1 = [1, 0.28125, 2.5, 0.03125]; weighted sum 1.828125; mean over 4:
EXPECTED_LOSS = 0.45703125
# d loss / d Q(S, A) = -w clip(delta, -1, 1) / B
EXPECTED_GRAD_Q = [-0.25, -0.09375, 0.0625, 0.125]


def test_double_q_targets_select_online_evaluate_target():
    next_online = torch.tensor(ONLINE[4:], dtype=torch.float32)
    next_target = torch.tensor(TARGET[4:], dtype=torch.float32)
    targets = double_q_targets(
        next_online,
        next_target,
        torch.tensor(REWARDS),
        torch.tensor(TERMINALS, dtype=torch.float32),
        discount=0.5,
    )
    assert targets.tolist() == [2.5, 1.0, -1.0, -1.5]
    plain_dqn = torch.tensor(REWARDS) + 0.5 * torch.tensor([1, 1, 0, 1]) * next_target.max(1).values
    assert plain_dqn.tolist() == [6.0, 3.0, -1.0, 4.5]  # what plain DQN's max would give


def test_double_q_targets_discount_and_terminal_masking():
    ones = torch.ones(2, 2)
    targets = double_q_targets(
        ones, 4 * ones, torch.tensor([0.5, 0.5]), torch.tensor([0.0, 1.0]), discount=0.75
    )
    assert targets.tolist() == [0.5 + 0.75 * 4, 0.5]


def lookup_agent(monkeypatch, **settings) -> DoubleDQN:
    """An agent (3 actions, discount 0.5) whose online network is LookupQ(ONLINE) and target
    network LookupQ(TARGET), with RMSProp's decay 0: after an update, g is its gradient."""
    monkeypatch.setattr("agents.double_dqn.build_network", lambda *arguments: LookupQ(ONLINE))
    agent = make_agent(num_actions=3, discount=0.5, rmsprop_decay=0.0, **settings)
    agent.target.load_state_dict({"table": torch.tensor(TARGET, dtype=torch.float32)})
    return agent


@pytest.mark.parametrize("single_forward", [False, True])
def test_learn_returns_exact_raw_td_errors_loss_and_gradient(single_forward, monkeypatch):
    agent = lookup_agent(monkeypatch)
    agent.single_forward = single_forward
    stats = agent.learn(id_batch(range(4), range(4, 8), ACTIONS, REWARDS, TERMINALS, WEIGHTS))
    assert isinstance(stats, LearnStats)
    assert stats.td_errors.dtype == np.float32
    assert stats.td_errors.tolist() == EXPECTED_TD
    assert stats.loss == EXPECTED_LOSS
    assert stats.mean_q == 0.5
    expected_grad = np.zeros((8, 3), np.float32)  # next-state rows get no gradient
    expected_grad[np.arange(4), ACTIONS] = EXPECTED_GRAD_Q
    gradient = agent.optimizer.state[agent.online.table]["grad_avg"]
    np.testing.assert_array_equal(gradient.numpy(), expected_grad)
    assert agent.target.table.tolist() == TARGET  # nothing reaches the target network


def test_weighted_huber_loss_values_and_gradient():
    q = torch.tensor(Q_TAKEN, requires_grad=True)
    targets = torch.tensor([2.5, 1.0, -1.0, -1.5])
    loss = weighted_huber_loss(targets - q, torch.tensor(WEIGHTS), kappa=1.0)
    assert loss.item() == EXPECTED_LOSS
    loss.backward()
    assert q.grad.tolist() == EXPECTED_GRAD_Q
    # kappa = 2: Huber = [1.125, 0.28125, 2*(3-1), 0.03125], weights as above.
    wider = weighted_huber_loss(torch.tensor(EXPECTED_TD), torch.tensor(WEIGHTS), kappa=2.0)
    assert wider.item() == (1.125 + 0.5 * 0.28125 + 0.25 * 4.0 + 2 * 0.03125) / 4


def test_same_seed_gives_same_weights_and_actions_without_global_rng():
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()[1].copy()
    first, second = make_agent(seed=11), make_agent(seed=11)
    states = random_batch(8).all_states
    actions = [
        [agent.policy.act(states[i % 16], 0.5) for i in range(40)] for agent in (first, second)
    ]
    assert actions[0] == actions[1]
    assert len(set(actions[0])) == 4
    for a, b in zip(first.online.parameters(), second.online.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state)


def test_target_changes_only_on_sync():
    agent = make_agent()
    initial = [p.clone() for p in agent.target.parameters()]
    for a, b in zip(agent.online.parameters(), initial, strict=True):
        assert torch.equal(a, b)  # built as a copy of the online net
    agent.learn(random_batch())
    assert all(torch.equal(a, b) for a, b in zip(agent.target.parameters(), initial, strict=True))
    online = agent.online.parameters()
    assert not all(torch.equal(a, b) for a, b in zip(online, initial, strict=True))
    agent.sync_target()
    for a, b in zip(agent.online.parameters(), agent.target.parameters(), strict=True):
        assert torch.equal(a, b)


def test_state_dict_round_trip_restores_q_values_and_optimizer():
    agent, batch = make_agent(seed=1), random_batch()
    agent.learn(batch)
    agent.sync_target()
    agent.learn(batch)
    buffer = io.BytesIO()
    torch.save(agent.state_dict(), buffer)
    buffer.seek(0)
    restored = make_agent(seed=2)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    probe = torch.from_numpy(random_batch(seed=5).all_states)
    with torch.no_grad():
        for net in ("online", "target"):
            assert torch.equal(getattr(agent, net)(probe), getattr(restored, net)(probe))
    for state_a, state_b in zip(
        agent.optimizer.state.values(), restored.optimizer.state.values(), strict=True
    ):
        assert all(torch.equal(state_a[k], state_b[k]) for k in ("grad_avg", "square_avg"))
    np.testing.assert_array_equal(agent.learn(batch).td_errors, restored.learn(batch).td_errors)
    for a, b in zip(agent.online.parameters(), restored.online.parameters(), strict=True):
        assert torch.equal(a, b)


def test_single_forward_and_split_forward_agree():
    joint, split, batch = make_agent(seed=4), make_agent(seed=4), random_batch(seed=2)
    joint.single_forward = True
    for _ in range(2):
        np.testing.assert_allclose(
            joint.learn(batch).td_errors, split.learn(batch).td_errors, rtol=1e-4, atol=1e-6
        )
    for a, b in zip(joint.online.parameters(), split.online.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_learn_reduces_loss_on_a_fixed_batch():
    agent, batch = make_agent(seed=6), random_batch(seed=3)
    losses = [agent.learn(batch).loss for _ in range(10)]
    assert losses[-1] < 0.5 * losses[0]


def test_learn_output_is_fresh_and_float32():
    agent, batch = make_agent(), random_batch(batch_size=8)
    stats = agent.learn(batch)
    assert stats.td_errors.shape == (8,)
    assert stats.td_errors.dtype == np.float32
    assert isinstance(stats.loss, float)
    assert isinstance(stats.mean_q, float)
    before = stats.td_errors.copy()
    for array in (batch.all_states, batch.rewards, batch.weights):
        array[...] = 0  # the replay reuses its buffers
    np.testing.assert_array_equal(stats.td_errors, before)


def test_learn_rejects_wrong_dtypes():
    batch = random_batch()
    batch.actions = batch.actions.astype(np.int32)
    with pytest.raises(ValueError, match=r"batch\.actions"):
        make_agent().learn(batch)


def test_resolve_device_cpu_and_bad_names():
    assert resolve_device("cpu") == torch.device("cpu")
    for name in ("tpu", "cuda:", "cuda:x", "CPU", "gpu"):
        with pytest.raises(ValueError, match=r"agent\.device"):
            resolve_device(name)


@pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")
def test_resolve_device_without_gpu():
    assert resolve_device("auto") == torch.device("cpu")
    for name in ("cuda", "cuda:0", "cuda:1"):
        with pytest.raises(ValueError, match=r"agent\.device") as error:
            resolve_device(name)
        assert "\n" not in str(error.value)
        assert "'auto', 'cpu'" in str(error.value)
    with pytest.raises(ValueError, match=r"agent\.device"):
        make_agent(device="cuda")


def test_staging_buffers_copy_and_are_reused():
    """The CUDA path's host staging, run with unpinned buffers to a CPU 'device'."""
    staging = PinnedStaging(torch.device("cpu"), pin_memory=False)
    batch = random_batch(batch_size=4)
    arrays = (batch.all_states, batch.actions, batch.weights)
    first = staging.to_device(arrays)
    pointers = [t.data_ptr() for t in first]
    for tensor, array in zip(first, arrays, strict=True):
        assert tensor.dtype == torch.from_numpy(array).dtype
        np.testing.assert_array_equal(tensor.numpy(), array)
        assert not np.shares_memory(tensor.numpy(), array)
    second = staging.to_device(arrays)
    assert [t.data_ptr() for t in second] == pointers
    larger = random_batch(batch_size=6)
    resized = staging.to_device((larger.all_states, larger.actions, larger.weights))
    assert resized[0].shape == (12, 4, 84, 84)


def test_an_array_already_page_locked_is_copied_to_the_device_from_where_it_is(monkeypatch):
    """The replay gathers states into page-locked memory for a CUDA learner: they take one
    copy to the device, not a copy into the staging buffer first. Without a GPU nothing is
    page-locked, so the states' memory is declared so here."""
    batch = random_batch(batch_size=4)
    locked = torch.from_numpy(batch.all_states).data_ptr()
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda tensor: tensor.data_ptr() == locked)
    staging = PinnedStaging(torch.device("cpu"), pin_memory=False)
    arrays = (batch.all_states, batch.actions, batch.weights)
    copies = []
    with monkeypatch.context() as patch:
        patch.setattr(torch.Tensor, "copy_", recorded_copy(torch.Tensor.copy_, copies))
        on_device = staging.to_device(arrays)
    assert [source.data_ptr() == locked for source in copies] == [True, False, False, False, False]
    for tensor, array in zip(on_device, arrays, strict=True):
        np.testing.assert_array_equal(tensor.numpy(), array)
        assert not np.shares_memory(tensor.numpy(), array)


def recorded_copy(copy, sources: list):
    def recorded(destination, source, *args, **kwargs):
        sources.append(source)
        return copy(destination, source, *args, **kwargs)

    return recorded


@pytest.mark.parametrize("batch_size", [16, 32, 64])
def test_rmsprop_epsilon_gives_the_summed_loss_update_at_any_batch_size(batch_size):
    """DeepMind's ε (0.01) is for a minibatch-summed loss; for our mean loss the optimizer
    needs ε / B² (tests/agents/test_optimizer.py proves the scaling rule)."""
    agent = make_agent(rmsprop_epsilon=0.01, batch_size=batch_size)
    assert agent.optimizer.param_groups[0]["epsilon"] == 0.01 / batch_size**2


@pytest.mark.parametrize("optimizer", ["deepmind_rmsprop", "torch_rmsprop"])
def test_keep_maximum_step_gives_prioritized_replay_uniforms_epsilon_dominated_step(optimizer):
    """With ε dominating the divisor (a gradient far below √ε), η/4 with the setting on steps
    exactly as far as uniform's η: DQN Zoo's ε/16 (inside the root) or ε/4 (outside); off,
    4× less far."""
    uniform = AgentSettings(device="cpu", optimizer=optimizer)
    prioritized = dataclasses.replace(uniform, learning_rate=uniform.learning_rate / 4)
    kept = dataclasses.replace(prioritized, keep_maximum_step=True)
    gradient = torch.full((3,), 1e-12, dtype=torch.float64)

    def first_step(agent):
        """The step of the optimizer a learner with these settings builds, from zero statistics."""
        learner = DoubleDQN(
            4, agent, rng=np.random.default_rng(0), frame_shape=(84, 84), batch_size=32
        )
        param, (g, g2) = torch.zeros(3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64)
        group, inside = learner.optimizer.param_groups[0], learner.optimizer.epsilon_inside
        centered_rmsprop([param], [gradient], [g], [g2], group, inside)
        return -param

    epsilon = 0.01 / 32**2 if optimizer == "deepmind_rmsprop" else 0.01
    assert optimizer_epsilon(uniform, 32) == optimizer_epsilon(prioritized, 32) == epsilon
    assert optimizer_epsilon(kept, 32) == pytest.approx(
        epsilon / 16 if optimizer == "deepmind_rmsprop" else epsilon / 4, rel=1e-12
    )
    torch.testing.assert_close(first_step(kept), first_step(uniform), rtol=1e-9, atol=0)
    torch.testing.assert_close(first_step(prioritized), first_step(uniform) / 4, rtol=1e-9, atol=0)


def test_the_step_profile_reads_the_optimizers_statistics():
    """A hand-built state: parameter 0 has g = 0.1, g2 = 0.01 + 0.0004 (variance 0.0004 above
    ε 1e-4: not dominated), parameter 1 g = 0, g2 = 0 (dominated)."""
    param = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    optimizer = CenteredRMSProp([param], lr=0.5, decay=0.95, epsilon=1e-4)
    optimizer.state[param]["grad_avg"].copy_(torch.tensor([0.1, 0.0]))
    optimizer.state[param]["square_avg"].copy_(torch.tensor([0.0104, 0.0]))
    profile = optimizer.step_profile()
    assert profile["epsilon_dominated"] == 0.5
    assert profile["mean_step"] == pytest.approx(0.5 * 0.1 / (0.0004 + 1e-4) ** 0.5 / 2)


def test_a_pipelined_agent_on_cpu_is_refused_in_one_line():
    """On a CPU acting and the update would compete for the same cores: pipelining is CUDA's."""
    with pytest.raises(ValueError) as error:
        make_agent(pipelined=True)
    assert str(error.value) == "agent.pipelined=true needs agent.device=cuda"


def assert_freed_on_del(build) -> None:
    """The learner `build()` returns is freed by `del` alone, with the cyclic collector off.
    A first one is built and collected before: the first optimizer of a process imports
    torch._dynamo, which leaves cyclic garbage that holds the frames building it, the
    learner's `__init__` among them."""
    build()
    gc.collect()
    gc.disable()
    try:
        agent = build()
        learner, network = weakref.ref(agent), weakref.ref(agent.online)
        del agent
        assert learner() is None and network() is None
    finally:
        gc.enable()


def test_a_learner_is_freed_as_soon_as_it_is_unreachable():
    """No reference cycle (learner -> captured update -> learner): `del` alone frees the
    learner, its networks and its optimizer."""

    def build() -> DoubleDQN:
        agent = make_agent(seed=9)
        agent.learn(random_batch())
        agent.policy.act(random_batch().all_states[0], 0.0)
        return agent

    assert_freed_on_del(build)


def test_learn_takes_states_already_on_its_device():
    """A replay that keeps its frames on the agent's device hands over a tensor there: the
    update is the same as from the numpy batch."""
    from_host, on_device, batch = make_agent(seed=8), make_agent(seed=8), random_batch(seed=6)
    expected = from_host.learn(batch)
    batch.all_states = torch.from_numpy(batch.all_states.copy())
    stats = on_device.learn(batch)
    np.testing.assert_array_equal(stats.td_errors, expected.td_errors)
    assert stats.loss == expected.loss
    batch.all_states = batch.all_states.float()
    with pytest.raises(ValueError, match=r"batch\.all_states must be uint8 on cpu"):
        on_device.learn(batch)


def test_dqn_targets_take_the_target_networks_maximum():
    """On the hand-built case above, DQN's target is r + γ(1 − t) max_a Q_target(S', a)."""
    targets = dqn_targets(
        torch.tensor(TARGET[4:], dtype=torch.float32),
        torch.tensor(REWARDS),
        torch.tensor(TERMINALS, dtype=torch.float32),
        discount=0.5,
    )
    assert targets.tolist() == [6.0, 3.0, -1.0, 4.5]


def test_learn_with_the_dqn_target_returns_its_exact_td_errors_and_loss(monkeypatch):
    agent = lookup_agent(monkeypatch, target_rule="dqn")
    stats = agent.learn(id_batch(range(4), range(4, 8), ACTIONS, REWARDS, TERMINALS, WEIGHTS))
    # y = [6, 3, -1, 4.5] minus Q(S, A) = [1, 0.25, 2, -1.25]
    assert stats.td_errors.tolist() == [5.0, 2.75, -3.0, 5.75]
    # Huber_1 = [4.5, 2.25, 2.5, 5.25] weighted by [1, 0.5, 0.25, 2]: 16.75 over 4
    assert stats.loss == 4.1875


def test_the_minatar_agent_learns_on_minatar_states():
    agent = make_agent(
        num_actions=6,
        history_length=1,
        frame_shape=(4, 10, 10),
        network="minatar",
        target_rule="dqn",
        optimizer="torch_rmsprop",
    )
    rng = np.random.default_rng(0)
    batch = FakeBatch(
        (rng.random((16, 1, 4, 10, 10)) < 0.1).astype(np.uint8),
        rng.integers(0, 6, 8),
        rng.uniform(-1, 1, 8).astype(np.float32),
        np.zeros(8, np.float32),
        np.ones(8, np.float32),
    )
    losses = [agent.learn(batch).loss for _ in range(30)]
    assert losses[-1] < losses[0]
    assert 0 <= agent.policy.act(batch.states[0], epsilon=0.0) < 6
    with pytest.raises(ValueError, match=r"batch\.all_states must be uint8 \(16, 1, 4, 10, 10\)"):
        agent.learn(random_batch())


@pytest.mark.parametrize(
    "setting,value,allowed",
    [
        ("learning_rate", 0.0, "a number > 0"),
        ("rmsprop_decay", 1.0, "in [0, 1)"),
        ("rmsprop_epsilon", 0.0, "a number > 0"),
        ("discount", 1.5, "in [0, 1]"),
    ],
)
def test_bad_optimizer_and_target_settings_are_refused_by_the_agent_settings(
    setting, value, allowed
):
    """The rules of the agent section's schema, the same the up-front validation applies."""
    with pytest.raises(ValueError) as error:
        make_agent(**{setting: value})
    assert str(error.value) == f"agent.{setting}={value} is not allowed: must be {allowed}"


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ({"target_rule": "sarsa"}, "agent.target_rule=sarsa is not allowed: must be one of"),
        ({"optimizer": "adam"}, "agent.optimizer=adam is not allowed: must be one of"),
        ({"network": "minatar"}, r"agent.network=minatar is not allowed here: the MinAtar"),
    ],
)
def test_unknown_rules_and_a_network_that_does_not_take_the_frames_are_refused(argument, message):
    with pytest.raises(ValueError, match=message):
        make_agent(**argument)
