"""The periodic test: exact per-episode scores in TensorBoard, and snapshots that a full disk
cannot corrupt or turn into a crash. Played by a worker process, it scores exactly what the
inline test scores (on CPU) and records in step order; tests a checkpoint lists as pending play
again from their saved agents; a worker that fails or dies is a one-line error, never a hang."""

import errno
import json
import math
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from artifacts.snapshot import read_snapshot
from artifacts.upgrade import upgrade_checkpoint_state
from envs.registry import ENVIRONMENTS
from training import periodic_test
from training.checkpoints import CheckpointError
from training.evaluation_worker import EvaluationWorkerError
from training.periodic_test import PeriodicTest

ENV = dict(
    kind="atari",
    game="breakout",
    frame_skip=4,
    screen_size=84,
    noop_max=30,
    max_episode_frames=400,
    repeat_action_probability=0.0,
    full_action_space=False,
)


class Writer:
    def __init__(self):
        self.scalars, self.texts = {}, {}

    def add_scalar(self, tag, value, step):
        self.scalars[tag, step] = value

    def add_text(self, tag, text, step):
        self.texts[tag, step] = text


def make_periodic_test(
    run_dir: Path, worker=False, epsilon=1.0, frames=1200, **env
) -> PeriodicTest:
    cfg = SimpleNamespace(
        env=SimpleNamespace(**{**ENV, **env}),
        evaluation=SimpleNamespace(every_frames=800, frames=frames, epsilon=epsilon, worker=worker),
        checkpoint=SimpleNamespace(keep=2),
    )
    return PeriodicTest(cfg, run_dir, np.random.default_rng(0))


def test_episode_scores_are_logged_exactly_and_snapshots_kept(tmp_path):
    test, writer = make_periodic_test(tmp_path), Writer()
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )
    test.run(agent, 200, writer)
    scores = json.loads(writer.texts["eval/episode_scores", 200])
    assert len(scores) == writer.scalars["eval/episodes", 200] >= 1
    assert np.mean(scores) == writer.scalars["eval/score", 200] == test.best_score
    assert read_snapshot(tmp_path / "agent_best.pt")["step"] == 200


def test_a_full_disk_keeps_the_previous_snapshot_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    test, writer = make_periodic_test(tmp_path), Writer()
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    def warnings(step: int) -> list[str]:
        return [
            f"warning: {name} not updated at step {step} (No space left on device); the "
            "previous one is kept"
            for name in ("agent_latest.pt", "agent_best.pt")
        ]

    monkeypatch.setattr(periodic_test, "save_agent_snapshot", full_disk)
    test.run(agent, 200, writer)  # the first test: nothing written, nothing to keep
    assert capsys.readouterr().err.splitlines() == warnings(200)
    assert test.best_score == -math.inf
    assert not (tmp_path / "agent_best.pt").exists()
    monkeypatch.undo()
    test.run(agent, 400, writer)
    monkeypatch.setattr(periodic_test, "save_agent_snapshot", full_disk)
    test.run(agent, 600, writer)
    # Random play scored better at 600 than at 400: both snapshots were due, neither written.
    assert writer.scalars["eval/score", 600] > writer.scalars["eval/score", 400]
    assert capsys.readouterr().err.splitlines() == warnings(600)
    assert test.best_score == writer.scalars["eval/score", 400]
    for name in ("agent_latest.pt", "agent_best.pt"):
        assert read_snapshot(tmp_path / name)["step"] == 400


def test_a_stop_interrupts_the_test_which_reruns_identically_when_the_run_resumes(tmp_path):
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )
    uninterrupted, writer = make_periodic_test(tmp_path / "a"), Writer()
    uninterrupted.run(agent, 200, writer)

    calls = []
    interrupted = make_periodic_test(tmp_path / "b")
    interrupted.stop_requested = lambda: calls.append(1) or len(calls) > 50
    interrupted.run(agent, 200, Writer())
    assert interrupted.pending_steps == [200] and len(calls) == 51
    assert not (tmp_path / "b" / "agent_latest.pt").exists()

    interrupted.stop_requested = lambda: False  # the resumed run
    resumed_writer = Writer()
    interrupted.resume(agent, 200, resumed_writer)
    assert interrupted.pending_steps == []
    assert resumed_writer.texts == writer.texts and resumed_writer.scalars == writer.scalars


def test_checkpoints_from_before_the_worker_resume_their_interrupted_test(tmp_path):
    """Read as a resume reads them, through `artifacts.upgrade`."""
    test = make_periodic_test(tmp_path)

    def load(state: dict) -> None:
        test.load_state_dict(upgrade_checkpoint_state({**state, "replay": {}}, identity={}))

    load({"best_score": 2.0, "pending_test_step": 200})
    assert (test.best_score, test.pending_steps) == (2.0, [200])
    load({"best_score": -math.inf, "pending_test_step": None})
    assert (test.best_score, test.pending_steps) == (-math.inf, [])
    assert test.state_dict() == {"best_score": -math.inf, "pending_test_steps": []}


# Three-episode tests where the network picks most actions (ε 0.2), so a forward pass that
# differed would change the scores.
STEPS = (100, 200, 300)


def agents() -> list[DoubleDQN]:
    """One agent per test, each with its own weights."""
    return [
        DoubleDQN(
            4,
            AgentSettings(device="cpu"),
            rng=np.random.default_rng(seed),
            frame_shape=(84, 84),
            batch_size=32,
        )
        for seed in STEPS
    ]


def workers() -> list[int]:
    """The live evaluation workers this process started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):  # not a process, or gone
            continue
        state, parent = fields[0], int(fields[1])
        if parent == os.getpid() and state != "Z" and b"evaluation_worker" in command:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def inline(tmp_path_factory):
    """The three tests played inline: what the worker must reproduce."""
    run_dir = tmp_path_factory.mktemp("inline")
    test, writer = make_periodic_test(run_dir, epsilon=0.2), Writer()
    for agent, step in zip(agents(), STEPS, strict=True):
        test.request(agent, step, writer)
    return SimpleNamespace(run_dir=run_dir, writer=writer, test=test)


def assert_same_snapshots(run_dir: Path, reference: Path) -> None:
    for name in ("agent_latest.pt", "agent_best.pt"):
        payload, expected = read_snapshot(run_dir / name), read_snapshot(reference / name)
        assert payload.keys() == expected.keys()
        for key, value in expected.items():
            if key == "online":
                assert all(torch.equal(payload[key][k], v) for k, v in value.items())
            else:
                assert payload[key] == value, key


def assert_same_tests(test: PeriodicTest, writer: Writer, inline) -> None:
    assert writer.scalars == inline.writer.scalars and writer.texts == inline.writer.texts
    assert test.best_score == inline.test.best_score
    assert test.rng.bit_generator.state == inline.test.rng.bit_generator.state
    assert test.pending_steps == []
    assert_same_snapshots(test.run_directory.path, inline.run_dir)


def test_the_worker_scores_exactly_what_the_inline_test_scores(tmp_path, inline):
    assert len(set(inline.writer.texts.values())) == 3  # three different tests
    test, writer = make_periodic_test(tmp_path, worker=True, epsilon=0.2), Writer()
    try:
        for agent, step in zip(agents(), STEPS, strict=True):
            test.request(agent, step, writer)
        assert test.pending_steps == list(STEPS)
        assert test.wait(writer)
    finally:
        test.close()
    assert_same_tests(test, writer, inline)
    assert not workers()

    # Each agent file stays until no checkpoint that may still exist lists its test.
    files = sorted((tmp_path / "pending_tests").iterdir())
    assert [f.name for f in files] == [f"step-{step:012d}.pt" for step in STEPS]
    for _ in range(2):
        assert test.state_dict() == {"best_score": test.best_score, "pending_test_steps": []}
    assert all(f.exists() for f in files)
    test.state_dict()
    assert not any(f.exists() for f in files)


def test_tests_pending_at_a_checkpoint_play_again_from_their_saved_agents(tmp_path, inline):
    stopped, writer = make_periodic_test(tmp_path, worker=True, epsilon=0.2), Writer()
    try:
        for agent, step in zip(agents(), STEPS, strict=True):
            stopped.request(agent, step, writer)
        # Results are only recorded when polled: none can be in this checkpoint.
        state, rng_state = stopped.state_dict(), stopped.rng.bit_generator.state
    finally:
        stopped.close()  # the run stops with all three playing or waiting
    assert not workers() and writer.scalars == {}
    assert state == {"best_score": -np.inf, "pending_test_steps": list(STEPS)}

    resumed, writer = make_periodic_test(tmp_path, worker=True, epsilon=0.2), Writer()
    resumed.rng.bit_generator.state = rng_state
    resumed.load_state_dict(state)
    stranger = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(99),
        frame_shape=(84, 84),
        batch_size=32,
    )  # the files count
    try:
        resumed.resume(stranger, STEPS[-1], writer)
        assert resumed.wait(writer)
    finally:
        resumed.close()
    assert_same_tests(resumed, writer, inline)


def test_resuming_tidies_the_agent_files_and_needs_those_of_pending_tests(tmp_path):
    directory = tmp_path / "pending_tests"
    directory.mkdir()
    names = ["step-000000000100.pt", "step-000000000300.pt", ".step-000000000200.pt.tmp"]
    for name in [*names, "notes.txt"]:
        (directory / name).touch()
    test = make_periodic_test(tmp_path, worker=True)
    agent = DoubleDQN(
        4,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )
    test.resume(agent, 200, Writer())  # nothing pending: no worker is started
    # Beyond the checkpoint or half-written: of steps the resumed run plays again.
    assert sorted(p.name for p in directory.iterdir()) == ["notes.txt", names[0]]
    test.state_dict()
    assert (directory / names[0]).exists()  # an older kept checkpoint may list its test
    test.state_dict()
    assert sorted(p.name for p in directory.iterdir()) == ["notes.txt"]

    test.load_state_dict({"best_score": 1.0, "pending_test_steps": [400]})
    with pytest.raises(CheckpointError) as error:
        test.resume(agent, 400, Writer())
    assert str(error.value) == (
        "the checkpoint lists the periodic test at step 400 as pending, but its agent "
        f"{directory / 'step-000000000400.pt'} is missing"
    )
    assert not workers()


def test_a_test_that_fails_in_the_worker_is_a_one_line_error(tmp_path):
    test = make_periodic_test(tmp_path, worker=True, kind="no_such_env")
    try:
        test.request(agents()[0], 100, Writer())
        with pytest.raises(EvaluationWorkerError) as error:
            test.wait(Writer())
    finally:
        test.close()
    assert str(error.value) == (
        "the periodic test at step 100 failed in the evaluation worker: ValueError: "
        f"env.kind=no_such_env is not allowed: must be one of {', '.join(ENVIRONMENTS)}"
    )
    assert test.pending_steps == [100] and not workers()


def test_a_worker_that_dies_is_a_one_line_error(tmp_path):
    test = make_periodic_test(tmp_path, worker=True, frames=10**8)  # hours of play
    try:
        test.request(agents()[0], 100, Writer())
        (worker,) = workers()
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(EvaluationWorkerError) as error:
            test.wait(Writer())
    finally:
        test.close()
    assert str(error.value) == (
        "the evaluation worker died (killed by SIGKILL) before finishing the periodic test at "
        "step 100"
    )
    assert not workers()
