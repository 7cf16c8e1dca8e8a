"""The periodic test: exact per-episode scores in TensorBoard, and snapshots that a full disk
cannot corrupt or turn into a crash."""

import errno
import json
import math
from types import SimpleNamespace

import numpy as np

from agents.double_dqn import DoubleDQN
from artifacts.snapshot import read_snapshot
from training import periodic_test
from training.periodic_test import PeriodicTest

ENV = dict(game="breakout", frame_skip=4, screen_size=84, noop_max=30, max_episode_frames=400,
           repeat_action_probability=0.0, full_action_space=False)


class Writer:
    def __init__(self):
        self.scalars, self.texts = {}, {}

    def add_scalar(self, tag, value, step):
        self.scalars[tag, step] = value

    def add_text(self, tag, text, step):
        self.texts[tag, step] = text


def make_periodic_test(tmp_path) -> PeriodicTest:
    cfg = SimpleNamespace(
        env=SimpleNamespace(**ENV),
        evaluation=SimpleNamespace(every_frames=800, frames=1200, epsilon=1.0),
    )
    return PeriodicTest(cfg, tmp_path, np.random.default_rng(0))


def test_episode_scores_are_logged_exactly_and_snapshots_kept(tmp_path):
    test, writer = make_periodic_test(tmp_path), Writer()
    agent = DoubleDQN(4, rng=np.random.default_rng(0), device="cpu")
    test.run(agent, 200, writer)
    scores = json.loads(writer.texts["eval/episode_scores", 200])
    assert len(scores) == writer.scalars["eval/episodes", 200] >= 1
    assert np.mean(scores) == writer.scalars["eval/score", 200] == test.best_score
    assert read_snapshot(tmp_path / "agent_best.pt")["step"] == 200


def test_a_full_disk_keeps_the_previous_snapshot_and_the_run_goes_on(
    tmp_path, monkeypatch, capsys
):
    test = make_periodic_test(tmp_path)
    agent = DoubleDQN(4, rng=np.random.default_rng(0), device="cpu")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(periodic_test, "save_agent_snapshot", full_disk)
    test.run(agent, 200, Writer())
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "warning: agent_latest.pt not updated at step 200 (No space left on device); the "
        "previous one is kept",
        "warning: agent_best.pt not updated at step 200 (No space left on device); the previous "
        "one is kept",
    ]
    assert test.best_score == -math.inf  # agent_best.pt still holds the earlier best
    assert not (tmp_path / "agent_best.pt").exists()


def test_a_stop_interrupts_the_test_which_reruns_identically_when_the_run_resumes(tmp_path):
    agent = DoubleDQN(4, rng=np.random.default_rng(0), device="cpu")
    uninterrupted, writer = make_periodic_test(tmp_path / "a"), Writer()
    uninterrupted.run(agent, 200, writer)

    calls = []
    interrupted = make_periodic_test(tmp_path / "b")
    interrupted.stop_requested = lambda: calls.append(1) or len(calls) > 50
    interrupted.run(agent, 200, Writer())
    assert interrupted.pending_step == 200 and len(calls) == 51
    assert not (tmp_path / "b" / "agent_latest.pt").exists()

    interrupted.stop_requested = lambda: False  # the resumed run
    resumed_writer = Writer()
    interrupted.run(agent, interrupted.pending_step, resumed_writer)
    assert interrupted.pending_step is None
    assert resumed_writer.texts == writer.texts and resumed_writer.scalars == writer.scalars
