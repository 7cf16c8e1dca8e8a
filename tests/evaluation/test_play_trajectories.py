"""`python -m evaluation.human_starts play`: an agent's own games as a trajectory file that
replays exactly, then `sample` and a human-starts evaluation from it (a freshly initialised
agent in a tiny run directory: no training; games capped at 2,000 frames)."""

import json
import shutil

import numpy as np
import pytest
import yaml

import evaluate
import evaluation.human_starts.__main__ as start_state_tools
from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from artifacts.snapshot import save_agent_snapshot
from envs.atari import make_env
from evaluation.human_starts.recording import play_trajectories
from evaluation.human_starts.start_state_file import load_start_states
from evaluation.human_starts.trajectories import load_trajectories, replay_env

PONG_MINIMAL = (0, 1, 3, 4, 11, 12)  # ALE ids of Pong's 6 actions, in the agent's order
CAP = 2000


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """What train.py leaves behind, as far as play reads it: config.yaml's env and a snapshot."""
    directory = tmp_path_factory.mktemp("run")
    config = {
        "seed": 0,
        "replay": {"kind": "uniform"},
        "env": {"game": "Pong", "max_episode_frames": CAP},
    }
    (directory / "config.yaml").write_text(yaml.safe_dump(config))
    agent = DoubleDQN(
        6,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(0),
        frame_shape=(84, 84),
        batch_size=32,
    )
    save_agent_snapshot(
        directory / "agent_best.pt", agent, game="pong", step=10_000, frames=40_000, score=-21.0
    )
    return directory


@pytest.fixture(scope="module")
def played(run_dir):
    out = run_dir / "agent_play.json"
    arguments = ["episodes=2", "seed=0", "epsilon=0.2", "device=cpu"]
    assert start_state_tools.main(["play", str(run_dir), f"out={out}", *arguments]) == 0
    return out


def replay(trajectory):
    """Score of the logged actions replayed from the seeded reset, and whether the game is
    over after the last one (never before it)."""
    env = replay_env("pong")
    env.reset(seed=trajectory.seed)
    ale, score = env.unwrapped.ale, 0.0
    for action in trajectory.actions:
        assert not ale.game_over()
        score += ale.act(action)
    over = ale.game_over()
    env.close()
    return score, over


def noops_of_reset(seed: int) -> int:
    env = make_env("pong", seed=0)
    _, info = env.reset(seed=seed)
    env.close()
    return info["episode_frame_number"]


def test_each_game_replays_to_its_recorded_score(played, run_dir):
    log = load_trajectories(played)
    assert (log.game, log.frames_per_action, len(log.trajectories)) == ("pong", 1, 2)
    assert len({t.seed for t in log.trajectories}) == 2
    for index, trajectory in enumerate(log.trajectories):
        assert CAP <= len(trajectory.actions) < CAP + 4  # truncated at the end of a 4-frame step
        assert replay(trajectory) == (trajectory.score, False)
        assert trajectory.score < 0  # the untrained agent lost points: the score tells games apart
        assert set(trajectory.actions[: noops_of_reset(trajectory.seed)]) == {0}
        assert set(trajectory.actions) <= set(PONG_MINIMAL) and {11, 12} & set(trajectory.actions)
        assert trajectory.source == (
            f"agent {run_dir / 'agent_best.pt'} (step 10000) play seed 0 epsilon 0.2 game {index}"
        )


def test_sample_and_a_human_starts_evaluation_use_the_file(played, run_dir, tmp_path):
    starts_file = tmp_path / "pong_starts.npz"
    arguments = [f"out={starts_file}", "count=3", f"max_episode_frames={CAP}"]
    assert start_state_tools.main(["sample", str(played), *arguments]) == 0  # verifies first
    starts = load_start_states(starts_file, game="pong")
    assert len(starts) == 3 and starts.trajectory_sources[0].startswith("agent_play.json[0] agent")
    arguments = ["protocol=human_starts", f"start_states={starts_file}", "device=cpu"]
    assert evaluate.main([str(run_dir), *arguments, f"output={tmp_path}"]) == 0
    document = json.loads((tmp_path / "evaluation_human_starts.json").read_text())
    assert document["runs"][0]["start_frames"] == starts.episode_frames.tolist()


def test_a_snapshot_outside_a_run_plays_whole_games_of_the_papers_env(run_dir, tmp_path):
    """No config.yaml: the paper's env (108,000-frame cap), so the game ends by game over, in
    the middle of a frame skip or not; the log stops on that very frame."""
    shutil.copy(run_dir / "agent_best.pt", tmp_path / "agent.pt")
    out = tmp_path / "deep" / "play.json"
    arguments = ["episodes=1", "seed=3", "epsilon=0", "device=cpu"]
    assert (
        start_state_tools.main(["play", str(tmp_path / "agent.pt"), f"out={out}", *arguments]) == 0
    )
    (trajectory,) = load_trajectories(out).trajectories
    assert trajectory.score == -21.0 and replay(trajectory) == (-21.0, True)


class Cycle:
    """A policy that plays actions 1, 2, ..., 5, 0, 1, ... whatever it sees."""

    num_actions, history_length = 6, 4

    def __init__(self):
        self.calls = 0

    def act(self, state, epsilon, rng=None):
        self.calls += 1
        return self.calls % 6


@pytest.mark.parametrize("kind", ["atari", "lean_atari"])
def test_each_action_is_logged_as_its_ale_id_once_per_frame_after_the_noops(kind):
    env_kwargs = {"game": "pong", "max_episode_frames": 100}
    rng = np.random.default_rng(0)
    log = play_trajectories(
        Cycle(), {"kind": kind, **env_kwargs}, reset_seeds=[5, 6], epsilon=0.0, rng=rng
    )
    for trajectory in log.trajectories:
        noops = noops_of_reset(trajectory.seed)
        steps = -(-(100 - noops) // 4)
        held = [PONG_MINIMAL[step % 6] for step in range(1, steps + 1) for _ in range(4)]
        assert trajectory.actions == (0,) * noops + tuple(held)
    # The replay ends where make_env's game ended, RAM for RAM.
    env = make_env(**env_kwargs, seed=0)
    env.reset(seed=5)
    policy = Cycle()
    for _ in range(-(-(100 - noops_of_reset(5)) // 4)):
        env.step(policy.act(None, 0.0))
    emulator = replay_env("pong")
    emulator.reset(seed=5)
    for action in log.trajectories[0].actions:
        emulator.unwrapped.ale.act(action)
    assert np.array_equal(emulator.unwrapped.ale.getRAM(), env.unwrapped.ale.getRAM())
    env.close()
    emulator.close()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["bogus=1"], "unknown argument 'bogus': allowed keys are device, episodes, epsilon, out"),
        (["snapshot=final"], "has no agent_final.pt (snapshot=final); snapshots present: agent_b"),
        (["snapshot=worst"], "snapshot=worst is not allowed: must be one of best, latest, final"),
        (["episodes=0"], "episodes=0 is not allowed: must be a positive integer"),
        (["env.bogus=1"], "env.bogus is not a setting; env has: frame_skip, "),
        (
            ["env.max_episode_frames=abc"],
            "env.max_episode_frames=abc is not allowed: must be an integer >= 0",
        ),
        (["env.repeat_action_probability=0.25"], "sticky actions cannot be logged exactly"),
        (["env.full_action_space=true"], "the agent has 6 actions, the env 18"),
        (["env.game=breakout"], "agent_best.pt is an agent for pong, not breakout"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(run_dir, tmp_path, capsys, arguments, message):
    out = tmp_path / "play.json"
    assert start_state_tools.main(["play", str(run_dir), f"out={out}", *arguments]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and message in error
    assert not out.exists()


def test_a_path_without_a_snapshot_or_an_unwritable_output_is_refused(run_dir, tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    cases = [
        ([str(tmp_path), f"out={tmp_path / 'x.json'}"], "is neither an agent snapshot (.pt) nor"),
        ([str(run_dir), f"out={tmp_path / 'a_file' / 'x.json'}"], "a_file is a file, not a dir"),
        ([str(run_dir), f"out={tmp_path}"], "is a directory: give a file name"),
        ([str(run_dir)], "play needs one run directory or agent snapshot and out=FILE.json"),
    ]
    for arguments, message in cases:
        assert start_state_tools.main(["play", *arguments]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
