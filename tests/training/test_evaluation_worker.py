"""`agent.cuda_graphs` reaches the evaluation worker: the periodic test starts the worker with
the learner's setting, and the worker rebuilds every agent it tests as a policy with it."""

import os
from multiprocessing.connection import Connection
from types import SimpleNamespace

import numpy as np
import pytest
from test_periodic_test import ENV, Writer, make_periodic_test

from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from artifacts.snapshot import load_agent_snapshot, save_agent_snapshot
from training import evaluation_worker, periodic_test
from training.evaluation_worker import Played, serve


@pytest.mark.parametrize("graphs", [False, True])
def test_the_periodic_test_starts_its_worker_with_the_learners_cuda_graphs(
    graphs, tmp_path, monkeypatch
):
    started = []

    class RecordingWorker:
        def __init__(self, env_kwargs, **settings):
            started.append(settings)

        def submit(self, step, agent_file):
            pass

    monkeypatch.setattr(periodic_test, "EvaluationWorker", RecordingWorker)
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu", cuda_graphs=graphs),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )
    make_periodic_test(tmp_path, worker=True).request(agent, 200, Writer())
    (settings,) = started
    assert (settings["device"], settings["cuda_graphs"]) == ("cpu", graphs)


@pytest.mark.parametrize("graphs", [False, True])
def test_the_worker_builds_each_tested_agent_with_the_runs_cuda_graphs(
    graphs, tmp_path, monkeypatch
):
    """`serve` in this process, over real pipes: the settings, one agent file, then the end."""
    loaded = []

    def recording_load(path, device, cuda_graphs):
        loaded.append((path, device, cuda_graphs))
        return load_agent_snapshot(path, device, cuda_graphs)

    monkeypatch.setattr(evaluation_worker, "load_agent_snapshot", recording_load)
    agent_file = tmp_path / "step-000000000200.pt"
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )
    save_agent_snapshot(agent_file, agent, game="breakout", step=200, frames=800, score=None)
    request_end, requests = os.pipe()
    results, result_end = os.pipe()
    sender = Connection(requests, readable=False)
    rng = np.random.default_rng(3)
    sender.send((dict(env_kwargs=ENV, epsilon=1.0, frames=100), rng, "cpu", graphs))
    sender.send(str(agent_file))
    sender.close()  # the worker returns once it has answered
    serve(request_end, result_end, os.getppid())
    answer = Connection(results, writable=False).recv()
    assert isinstance(answer, Played) and len(answer.result.scores) >= 1
    assert loaded == [(str(agent_file), "cpu", graphs)]


def test_a_test_played_inline_acts_through_the_learners_online_policy(tmp_path, monkeypatch):
    played = []

    def recording_play(policy, env_kwargs, **settings):
        played.append(policy)
        return SimpleNamespace(scores=np.zeros(1), mean=0.0, summary=lambda *_: {})

    monkeypatch.setattr(periodic_test, "play_test", recording_play)
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )
    make_periodic_test(tmp_path).request(agent, 200, Writer())
    assert played == [agent.online_policy()]
