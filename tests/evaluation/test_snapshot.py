"""Agent snapshots: round trip, atomic writes, and one-line refusals of bad files."""

import os
import pickle

import numpy as np
import pytest
import torch

from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from artifacts.snapshot import load_agent_snapshot, save_agent_snapshot
from tests.evaluation.test_evaluate_minatar import minatar_agent
from tests.training.test_checkpoints import failing_after_half


def make_agent(seed=0, num_actions=6):
    return DoubleDQN(
        num_actions,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(seed),
        frame_shape=(84, 84),
        batch_size=32,
    )


def test_round_trip_keeps_weights_metadata_and_greedy_actions(tmp_path):
    agent = make_agent()
    path = tmp_path / "run" / "agent_best.pt"
    save_agent_snapshot(path, agent, game="pong", step=1234, frames=4936, score=-20.5)
    loaded, info = load_agent_snapshot(path, device="cpu")
    assert (info.game, info.step, info.frames, info.score) == ("pong", 1234, 4936, -20.5)
    assert (info.num_actions, info.history_length) == (6, 4)
    assert (loaded.num_actions, loaded.history_length) == (6, 4)
    for name, tensor in agent.online.state_dict().items():
        assert torch.equal(loaded.network.state_dict()[name], tensor)
    assert not loaded.network.training
    states = np.random.default_rng(1).integers(0, 256, (8, 4, 84, 84), dtype=np.uint8)
    rng = np.random.default_rng(0)
    expected = [agent.policy.act(s, 0.0) for s in states]
    assert [loaded.act(s, 0.0, rng=rng) for s in states] == expected
    assert sorted(p.name for p in path.parent.iterdir()) == ["agent_best.pt"]


def test_a_minatar_agent_comes_back_with_its_network_and_frame_shape(tmp_path):
    agent = minatar_agent()
    path = tmp_path / "agent_best.pt"
    save_agent_snapshot(path, agent, game="breakout", step=10, frames=10, score=1.0)
    loaded, info = load_agent_snapshot(path)
    assert (info.game, info.history_length) == ("breakout", 1)
    assert type(loaded.network).__name__ == "MinAtarQNetwork"
    states = np.random.default_rng(1).integers(0, 2, (8, 1, 4, 10, 10), dtype=np.uint8)
    rng = np.random.default_rng(0)
    expected = [agent.policy.act(s, 0.0) for s in states]
    assert [loaded.act(s, 0.0, rng=rng) for s in states] == expected


def test_overwrite_is_atomic_and_score_may_be_none(tmp_path, monkeypatch):
    path = tmp_path / "agent_latest.pt"
    save_agent_snapshot(path, make_agent(0), game="pong", step=1, frames=4, score=None)
    monkeypatch.setattr(os, "write", failing_after_half(os.write))  # the disk fills midway
    with pytest.raises(OSError, match="No space left on device"):
        save_agent_snapshot(path, make_agent(1), game="pong", step=2, frames=8, score=-3.0)
    monkeypatch.undo()
    assert load_agent_snapshot(path)[1].step == 1
    assert [p.name for p in tmp_path.iterdir()] == ["agent_latest.pt"]
    save_agent_snapshot(path, make_agent(1), game="pong", step=2, frames=8, score=None)
    _, info = load_agent_snapshot(path)
    assert (info.step, info.score) == (2, None)
    assert [p.name for p in tmp_path.iterdir()] == ["agent_latest.pt"]


class Exploit:
    """A pickle that would run code when unpickled."""

    def __reduce__(self):
        return (print, ("code ran",))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"does not exist"),
        (b"\x00" * 64, r"is not an agent snapshot: it is truncated, corrupt or another kind"),
        ("truncated", r"is not an agent snapshot: it is truncated, corrupt or another kind"),
        (
            {"online": {}},
            r"is not an agent snapshot of this application \(format must be 'per-atari-agent'",
        ),
        ("agent_state_dict", r"is not an agent snapshot"),
        ("exploit", r"is not an agent snapshot: it is truncated, corrupt or another kind"),
        (
            {"format": "per-atari-agent", "version": 2},
            r"has format version 2; this version of the application reads version 1",
        ),
        ({"format": "per-atari-agent", "version": 1, "online": {}}, r"key 'num_actions' is"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "agent.pt"
    if content == "truncated":
        save_agent_snapshot(path, make_agent(), game="pong", step=1, frames=4, score=None)
        path.write_bytes(path.read_bytes()[:1000])
    elif content == "agent_state_dict":  # a bare DoubleDQN.state_dict(), not a snapshot
        torch.save(make_agent().state_dict(), path)
    elif content == "exploit":
        path.write_bytes(pickle.dumps(Exploit(), protocol=2))
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(ValueError, match=message) as error:
        load_agent_snapshot(path)
    assert "\n" not in str(error.value) and str(path) in str(error.value)
    assert "weights_only" not in str(error.value)  # never advise loading untrusted code


def test_weights_of_another_network_are_refused(tmp_path):
    path = tmp_path / "agent.pt"
    save_agent_snapshot(path, make_agent(num_actions=6), game="pong", step=1, frames=4, score=1.0)
    payload = torch.load(path, weights_only=True)
    payload["num_actions"] = 4
    torch.save(payload, path)
    with pytest.raises(ValueError, match="weights do not fit the network") as error:
        load_agent_snapshot(path)
    assert "\n" not in str(error.value)


def test_the_final_snapshot_is_a_snapshot_with_target_network_and_optimizer(tmp_path):
    agent = make_agent()
    path = tmp_path / "agent_final.pt"
    save_agent_snapshot(path, agent, game="pong", step=50, frames=200, final=True)
    loaded, info = load_agent_snapshot(path)
    assert (info.game, info.step, info.frames, info.score) == ("pong", 50, 200, None)
    for name, tensor in agent.online.state_dict().items():
        assert torch.equal(loaded.network.state_dict()[name], tensor)
    payload = torch.load(path, weights_only=True)
    state = agent.state_dict()
    assert payload["optimizer"].keys() == state["optimizer"].keys()
    for name, tensor in state["target"].items():
        assert torch.equal(payload["target"][name], tensor)
