"""evaluate.py on MinAtar runs: raw scores from real MinAtar episodes under the episodes
protocol, and one-line refusals of what needs human reference data MinAtar does not have.
The run directory is what train.py leaves behind: the composed minatar_dqn config and a
freshly initialised MinAtar agent (no training)."""

import csv
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import evaluate
import evaluation.human_starts.__main__ as start_state_tools
from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from artifacts.snapshot import save_agent_snapshot
from evaluation.protocol_registry import PROTOCOLS
from evaluation.protocols import evaluate_noop
from reporting.score_table import RAW_GAME_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
GAME = "breakout"
EPISODES = 4


def minatar_agent(seed: int = 0) -> DoubleDQN:
    return DoubleDQN(
        6,
        AgentSettings(
            device="cpu",
            history_length=1,
            network="minatar",
            target_rule="dqn",
            optimizer="torch_rmsprop",
        ),
        rng=np.random.default_rng(seed),
        frame_shape=(4, 10, 10),
        batch_size=32,
    )


def make_minatar_run(directory: Path, overrides: tuple[str, ...] = ()) -> Path:
    """What train.py leaves behind: config.yaml and the best snapshot."""
    overrides = ("experiment=minatar_dqn", f"env.game={GAME}", "agent.device=cpu", *overrides)
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    directory.mkdir(parents=True)
    (directory / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    save_agent_snapshot(
        directory / "agent_best.pt", minatar_agent(), game=GAME, step=5000, frames=5000, score=0.5
    )
    return directory


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_minatar_run(tmp_path_factory.mktemp("minatar") / "run")


def test_the_episodes_protocol_reports_raw_scores_of_real_minatar_episodes(run, tmp_path, capsys):
    arguments = [str(run), "protocol=episodes", f"episodes={EPISODES}", "device=cpu", "seed=3"]
    assert evaluate.main([*arguments, f"output={tmp_path}"]) == 0
    printed = capsys.readouterr().out
    title = (
        f"Episodes from the env's own reset (no no-ops; ε 0.01, {EPISODES} episodes per run), "
        "raw scores, not human-normalized; episodes not capped\n"
    )
    assert printed.startswith(title)
    heads = f"{'game':<18}{'variant':<13}{'runs':>4}{'episodes':>9}{'score mean ± std':>24}"
    assert printed.splitlines()[2] == heads  # no normalized or paper column
    assert "paper" not in printed and "median" not in printed  # nor summary lines
    document = json.loads((tmp_path / "evaluation_episodes.json").read_text())
    assert document["normalized"] is False and document["env_kinds"] == ["minatar"]
    assert document["summary"] == [] and document["paper_note"] is None
    (only,) = document["runs"]
    assert (only["game"], only["env_kind"], only["epsilon"], only["normalized"]) == (
        GAME,
        "minatar",
        0.01,
        None,
    )
    # The very episodes the evaluator plays on the run's env (sticky actions and difficulty
    # ramping from its config) with the run's stream of seed=3: MinAtar's resets play no no-ops.
    env_kwargs = {**OmegaConf.to_container(OmegaConf.load(run / "config.yaml"))["env"]}
    stream = np.random.SeedSequence(3).spawn(1)[0]
    expected = evaluate_noop(
        minatar_agent().policy, env_kwargs, rng=np.random.default_rng(stream), episodes=EPISODES
    )
    assert only["episode_scores"] == expected.scores.tolist()
    assert only["start_frames"] == [0] * EPISODES and (expected.episode_frames > 0).all()
    assert only["mean"] == pytest.approx(np.mean(expected.scores))
    cells = f"{only['mean']:.1f} ± {only['std']:.1f}"
    assert printed.splitlines()[3] == f"{GAME:<18}{'dqn-uniform':<13}{1:>4}{EPISODES:>9}{cells:>24}"
    rows = list(csv.DictReader((tmp_path / "evaluation_episodes.csv").open()))
    assert tuple(rows[0]) == RAW_GAME_COLUMNS and rows[0]["game_id"] == GAME


def test_the_default_protocol_of_a_minatar_run_is_the_one_that_works(run, tmp_path, capsys):
    assert evaluate.main([str(run), "episodes=1", "device=cpu", f"output={tmp_path}"]) == 0
    assert capsys.readouterr().out.startswith("Episodes from the env's own reset")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "evaluation_episodes.csv",
        "evaluation_episodes.json",
    ]


def test_the_episodes_protocol_plays_with_the_runs_test_epsilon_unless_overridden(
    tmp_path, monkeypatch, capsys
):
    run = make_minatar_run(tmp_path / "run", ("evaluation.epsilon=0.05",))
    calls = []
    protocol = PROTOCOLS["episodes"]

    def evaluator(agent, env_kwargs, *, rng, epsilon, episodes, start_states):
        calls.append(epsilon)
        return protocol.evaluate(
            agent, env_kwargs, rng=rng, epsilon=epsilon, episodes=1, start_states=None
        )

    monkeypatch.setitem(PROTOCOLS, "episodes", replace(protocol, evaluate=evaluator))
    assert evaluate.main([str(run), "device=cpu"]) == 0
    assert "(no no-ops; ε 0.05, 30 episodes per run)" in capsys.readouterr().out
    assert evaluate.main([str(run), "device=cpu", "epsilon=0.5"]) == 0
    assert calls == [0.05, 0.5]
    document = json.loads((run / "evaluation_episodes.json").read_text())
    assert document["epsilon"] == document["runs"][0]["epsilon"] == 0.5


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["protocol=human_starts"],
            "protocol human_starts is not available for env.kind=minatar: the minatar games "
            "have no human start states (protocols for it: episodes)",
        ),
        (
            ["protocol=human_starts", "start_states=breakout.npz"],
            "protocol human_starts is not available for env.kind=minatar: the minatar games "
            "have no human start states",
        ),
        (
            ["protocol=noop"],
            "protocol noop is not available for env.kind=minatar: the minatar games have no "
            "human reference scores to normalize with (protocols for it: episodes)",
        ),
        (
            ["env.noop_max=5"],
            "env.noop_max is not a setting; env has: difficulty_ramping, frame_skip, game, "
            "max_episode_frames, repeat_action_probability",
        ),
        (["env.screen_size=84"], "env.screen_size is not a setting; env has: "),
        (["env.frame_skip=two"], "env.frame_skip=two is not allowed: must be a positive integer"),
    ],
)
def test_what_minatar_cannot_do_is_one_line_before_anything_is_played_or_written(
    run, monkeypatch, capsys, arguments, message
):
    def played(*args, **kwargs):
        raise AssertionError("an episode was played")

    for name, protocol in PROTOCOLS.items():
        monkeypatch.setitem(PROTOCOLS, name, replace(protocol, evaluate=played))
    before = sorted(p.name for p in run.iterdir())
    assert evaluate.main([str(run), "device=cpu", *arguments]) == 2
    printed = capsys.readouterr()
    assert message in printed.err and printed.err.count("\n") == 1
    assert printed.out == ""
    assert sorted(p.name for p in run.iterdir()) == before


@pytest.mark.parametrize(
    "override", ["env.difficulty_ramping=false", "env.repeat_action_probability=0.0"]
)
def test_minatar_env_overrides_reach_the_evaluator(run, tmp_path, monkeypatch, override):
    """make_minatar_env's own arguments are accepted (the Atari run's refusal of them:
    test_evaluate_cli) and override the run's config."""
    seen = []

    def evaluator(agent, env_kwargs, *, rng, epsilon, episodes, start_states):
        seen.append(env_kwargs)
        return evaluate_noop(agent, env_kwargs, rng=rng, epsilon=epsilon, episodes=1)

    monkeypatch.setitem(PROTOCOLS, "episodes", replace(PROTOCOLS["episodes"], evaluate=evaluator))
    arguments = [str(run), "device=cpu", f"output={tmp_path}", override]
    assert evaluate.main(arguments) == 0
    key, _, text = override.removeprefix("env.").partition("=")
    (env_kwargs,) = seen
    assert str(env_kwargs[key]).lower() == text and env_kwargs["kind"] == "minatar"


def test_a_minatar_cap_is_in_the_title(run, tmp_path, capsys):
    assert (
        evaluate.main(
            [str(run), "episodes=2", "env.max_episode_frames=3", "device=cpu", f"output={tmp_path}"]
        )
        == 0
    )
    assert "; episodes capped at 3 frames\n" in capsys.readouterr().out


def test_a_minatar_snapshot_outside_its_run_directory_is_refused_in_one_line(run, tmp_path, capsys):
    """Without its config the snapshot is taken for an Atari one, whose frames it cannot read."""
    snapshot = tmp_path / "agent.pt"
    shutil.copy(run / "agent_best.pt", snapshot)
    assert evaluate.main([str(snapshot), "protocol=episodes", "device=cpu"]) == 2
    error = capsys.readouterr().err
    assert (
        "is an agent for frames of shape (4, 10, 10), but env.kind=atari gives frames of shape "
        "(84, 84) (no run config beside it: evaluate its run directory)" in error
    )
    assert error.count("\n") == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["agent.pt"]


def test_playing_trajectories_is_refused_for_a_minatar_run(run, tmp_path, capsys):
    out = tmp_path / "play.json"
    assert start_state_tools.main(["play", str(run), f"out={out}", "device=cpu"]) == 2
    error = capsys.readouterr().err
    assert "play is not available for env.kind=minatar: the minatar games have no human start" in (
        error
    )
    assert error.count("\n") == 1 and not out.exists()
