"""evaluate.py and the start-state commands end to end, on tiny run directories made here
(a composed demo config and a freshly initialised agent: no training)."""

import csv
import errno
import json
import os
import subprocess
import sys
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
from evaluation.human_starts.trajectories import Trajectory, TrajectoryLog, save_trajectories
from evaluation.protocol_registry import PROTOCOLS
from evaluation.protocols import EvaluationResult
from evaluation.runs import RunSpec
from evaluation.scores import normalized_score

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["device=cpu", "env.max_episode_frames=160"]


def make_run(directory: Path, seed: int, replay: str = "uniform") -> Path:
    """What train.py leaves behind: config.yaml and the best and latest snapshots."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=["experiment=demo", f"replay={replay}", f"seed={seed}", "agent.device=cpu"],
        )
    directory.mkdir(parents=True)
    (directory / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    agent = DoubleDQN(
        6,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(seed),
        frame_shape=(84, 84),
        batch_size=32,
    )
    for name, score in (("agent_best.pt", -20.0), ("agent_latest.pt", -21.0)):
        save_agent_snapshot(
            directory / name, agent, game="pong", step=10_000, frames=40_000, score=score
        )
    return directory


@pytest.fixture(scope="module")
def multirun(tmp_path_factory):
    root = tmp_path_factory.mktemp("multirun")
    for seed in (0, 1):
        make_run(root / f"seed={seed}", seed)
    return root


@pytest.fixture(scope="module")
def start_file(tmp_path_factory):
    """A start-state file made by the trajectory command from a logged game."""
    directory = tmp_path_factory.mktemp("starts")
    choices = np.random.default_rng(0).integers(0, 6, 100)
    minimal = [0, 1, 3, 4, 11, 12]
    log = TrajectoryLog("pong", (Trajectory(tuple(minimal[c] for c in choices), 0, None, "t"),), 4)
    save_trajectories(directory / "pong_human.json", log)
    out = directory / "pong.npz"
    status = start_state_tools.main(
        [
            "sample",
            str(directory / "pong_human.json"),
            f"out={out}",
            "count=3",
            "max_episode_frames=120",
        ]
    )
    assert status == 0 and out.is_file()
    return out


def test_noop_protocol_on_a_run_directory_prints_and_writes_the_table(multirun, capsys):
    run = multirun / "seed=0"
    assert evaluate.main([str(run), "episodes=2", *QUICK]) == 0
    printed = capsys.readouterr().out
    assert "No-op starts evaluation (1-30 random no-ops, ε 0.01, 2 episodes per run)" in printed
    assert "Pong" in printed and "uniform" in printed
    assert "19.1 (111%)" in printed and "18.9 (110%)" in printed  # the paper's Table 7 / 6
    document = json.loads((run / "evaluation_noop.json").read_text())
    assert document["protocol"] == "noop" and document["epsilon"] == 0.01
    (only,) = document["runs"]
    assert (only["game"], only["variant"], only["seed"], only["episodes"]) == (
        "pong",
        "uniform",
        0,
        2,
    )
    # Pong's no-op reference: random -20.7, human 14.6.
    assert only["normalized"] == pytest.approx((only["mean"] + 20.7) / 35.3)
    rows = list(csv.DictReader((run / "evaluation_noop.csv").open()))
    assert len(rows) == 1 and rows[0]["rom_id"] == "pong" and rows[0]["paper_ddqn"] == "19.1"


def test_human_starts_protocol_with_a_start_state_file(multirun, start_file, capsys):
    run = multirun / "seed=1"
    assert (
        evaluate.main(
            [
                str(run),
                "protocol=human_starts",
                f"start_states={start_file}",
                "snapshot=latest",
                *QUICK,
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "Human-starts evaluation (ε 0.001, all start points per run)" in printed
    document = json.loads((run / "evaluation_human_starts.json").read_text())
    assert document["start_states"] == [str(start_file)] and document["snapshot"] == "latest"
    assert document["runs"][0]["episodes"] == 3
    assert document["games"][0]["paper_ddqn_prop_normalized"] == pytest.approx((18.9 + 18.0) / 33.5)
    assert (run / "evaluation_human_starts.csv").is_file()


def test_a_multirun_directory_aggregates_seeds_with_an_iqm(multirun, tmp_path, capsys):
    pytest.importorskip("rliable")
    assert (
        evaluate.main(
            [str(multirun), "episodes=1", f"output={tmp_path}", "bootstrap_reps=200", *QUICK]
        )
        == 0
    )
    summary = json.loads((tmp_path / "evaluation_noop.json").read_text())["summary"]
    (uniform,) = summary
    assert uniform["games"] == 1 and uniform["iqm"] is not None
    assert uniform["iqm_ci_low"] <= uniform["iqm"] <= uniform["iqm_ci_high"]
    assert "IQM" in capsys.readouterr().out


def test_a_run_plays_the_same_episodes_alone_and_beside_others(multirun, tmp_path):
    """Its no-op counts depend on seed=, not on the directory that named it."""
    arguments = ["episodes=3", "bootstrap_reps=200", *QUICK]
    assert evaluate.main([str(multirun), *arguments, f"output={tmp_path}"]) == 0
    together = json.loads((tmp_path / "evaluation_noop.json").read_text())["runs"]
    assert [run["run"] for run in together] == ["seed=0", "seed=1"]
    for number, run in enumerate(together):
        alone = tmp_path / f"alone{number}"  # a path with `=` is no key=value argument
        assert evaluate.main([str(multirun / run["run"]), *arguments, f"output={alone}"]) == 0
        (played,) = json.loads((alone / "evaluation_noop.json").read_text())["runs"]
        assert played["start_frames"] == run["start_frames"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["protocl=noop"], "unknown argument 'protocl': allowed keys are"),
        (
            ["protocol=human"],
            "protocol=human is not allowed: must be one of noop, human_starts, episodes",
        ),
        (["protocol=human_starts"], "protocol=human_starts needs start_states="),
        (["env.frame_skp=3"], "env.frame_skp is not a setting; env has: frame_skip"),
        (["env.difficulty_ramping=false"], "env.difficulty_ramping is not a setting; env has: "),
        (["env.frame_skip=four"], "env.frame_skip=four is not allowed: must be a positive integer"),
        (["episodes=0"], "episodes=0 is not allowed: must be a positive integer"),
        (
            ["episodes=99999999999999999999999"],  # beyond 64 bits
            "episodes=99999999999999999999999 is not allowed: must be a positive integer, at "
            "most 100000",
        ),
        (
            ["bootstrap_reps=1000000000"],
            "bootstrap_reps=1000000000 is not allowed: must be a positive integer, at most 1000000",
        ),
        (["snapshot=final"], "snapshot=final is not allowed: must be one of best, latest"),
        (["output=/dev/null/out"], "output=/dev/null/out cannot be used: /dev/null is a file"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(multirun, capsys, arguments, message):
    assert evaluate.main([str(multirun / "seed=0"), *arguments]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1


# Every registered protocol, and one that exists only as a record: nothing in evaluate.py or
# its score table may depend on a protocol's name.
REGISTERED = [*PROTOCOLS.values(), replace(PROTOCOLS["noop"], name="new", epsilon=0.5, budget=3)]


@pytest.mark.parametrize("protocol", REGISTERED, ids=lambda protocol: protocol.name)
def test_the_registry_drives_evaluate_py(multirun, tmp_path, monkeypatch, capsys, protocol):
    """Title, ε, budget, start-state need, evaluator and reference table come from the record."""
    calls = []

    def evaluator(agent, env_kwargs, *, rng, epsilon, episodes, start_states):
        calls.append((epsilon, episodes, start_states))
        return EvaluationResult(np.array([5.0, 7.0]), np.array([90, 95]), np.array([3, 4]), 185)

    monkeypatch.setitem(PROTOCOLS, protocol.name, replace(protocol, evaluate=evaluator))
    monkeypatch.setattr(evaluate, "load_start_states", lambda path, game: f"{game} starts")
    run = str(multirun / "seed=0")
    arguments = [run, f"protocol={protocol.name}", f"output={tmp_path}", "device=cpu"]
    if protocol.needs_start_states:
        assert evaluate.main(arguments) == 2
        assert "needs start_states=" in capsys.readouterr().err
        arguments.append("start_states=pong.npz")
    assert evaluate.main(arguments) == 0
    starts = "pong starts" if protocol.needs_start_states else None
    assert calls == [(protocol.epsilon, protocol.budget, starts)]
    title = protocol.title.format(
        noop_max=30,
        reset="1-30 random no-ops",
        epsilon=protocol.epsilon,
        episodes=protocol.budget_text(None),
    )
    printed = capsys.readouterr().out
    assert printed.startswith(title + "; episodes capped at 108,000 frames\n")
    document = json.loads((tmp_path / f"evaluation_{protocol.name}.json").read_text())
    assert document["protocol"] == protocol.name and document["epsilon"] == protocol.epsilon
    assert document["normalized"] is (protocol.reference is not None)
    if protocol.reference is None:  # raw scores: no normalized value, no paper columns
        assert document["runs"][0]["normalized"] is None
        assert "normalized" not in document["games"][0]
        assert "paper" not in printed and document["summary"] == []
        return
    expected = normalized_score(6.0, "pong", protocol.reference)
    assert document["runs"][0]["normalized"] == document["games"][0]["normalized"] == expected


def test_the_episodes_protocol_on_atari_plays_its_noop_starts_and_reports_raw_scores(
    multirun, tmp_path, capsys
):
    arguments = [str(multirun / "seed=0"), "protocol=episodes", "episodes=2", *QUICK]
    assert evaluate.main([*arguments, f"output={tmp_path}"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(
        "Episodes from the env's own reset (1-30 random no-ops; ε 0.01, 2 episodes per run), "
        "raw scores, not human-normalized; episodes capped at 160 frames\n"
    )
    assert "Pong" in printed and "paper" not in printed
    (run,) = json.loads((tmp_path / "evaluation_episodes.json").read_text())["runs"]
    assert run["normalized"] is None and run["env_kind"] == "atari"
    assert len(run["episode_scores"]) == 2 and all(1 <= k <= 30 for k in run["start_frames"])
    rows = list(csv.DictReader((tmp_path / "evaluation_episodes.csv").open()))
    assert (rows[0]["game"], rows[0]["game_id"]) == ("Pong", "pong")
    assert "normalized" not in rows[0]


def test_the_protocol_caps_episodes_where_the_run_config_does_not():
    spec = RunSpec("run", Path("agent_best.pt"), {"game": "pong"}, "uniform", 0)
    for protocol in PROTOCOLS.values():
        env = evaluate.env_arguments(protocol, spec, {"env": {}})
        assert env == {"game": "pong", "max_episode_frames": protocol.max_episode_frames}
        overridden = evaluate.env_arguments(protocol, spec, {"env": {"max_episode_frames": 9}})
        assert overridden["max_episode_frames"] == 9


def test_a_start_state_file_of_another_game_is_refused(tmp_path, start_file, capsys):
    run = make_run(tmp_path / "run", 0)
    text = (run / "config.yaml").read_text().replace("game: pong", "game: breakout")
    (run / "config.yaml").write_text(text)
    assert evaluate.main([str(run), "protocol=human_starts", f"start_states={start_file}"]) == 2
    assert "is an agent for pong, but its run config says env.game=breakout" in (
        capsys.readouterr().err
    )


def test_show_prints_the_frame_numbers_and_writes_a_png(start_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "starts.png"
    assert start_state_tools.main(["show", str(start_file), f"png={png}"]) == 0
    printed = capsys.readouterr().out
    assert "3 start points of Pong (pong, ROM MD5" in printed
    assert "start frame numbers:" in printed
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_py_runs_as_a_command_on_a_snapshot_file(multirun, tmp_path):
    command = [
        sys.executable,
        "evaluate.py",
        str(multirun / "seed=0" / "agent_latest.pt"),
        "episodes=1",
        f"output={tmp_path}",
        *QUICK,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "normalized" in done.stdout and (tmp_path / "evaluation_noop.csv").is_file()
    (run,) = json.loads((tmp_path / "evaluation_noop.json").read_text())["runs"]
    assert run["run"] == "agent_latest.pt" and run["seed"] == 0  # config.yaml beside it
    assert len(run["episode_scores"]) == 1 and 1 <= run["start_frames"][0] <= 30


def test_a_directory_without_runs_or_snapshots_is_one_line_error(tmp_path, capsys):
    assert evaluate.main([str(tmp_path)]) == 2
    assert f"no run directory with config.yaml and agent_best.pt under {tmp_path}" in (
        capsys.readouterr().err
    )
    run = make_run(tmp_path / "run", 0)
    (run / "agent_best.pt").unlink()
    assert evaluate.main([str(run)]) == 2
    assert "has no agent_best.pt (snapshot=best); snapshots present: agent_latest.pt" in (
        capsys.readouterr().err
    )


def fill(directory: Path) -> None:
    """Write into `directory` until its file system has no byte left."""
    descriptor = os.open(directory / "filling", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(descriptor, bytes(4096))
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(descriptor)


def test_an_output_on_a_full_disk_is_refused_before_the_evaluation(
    multirun, small_file_system, capsys
):
    output = small_file_system(2**20)
    fill(output)
    assert evaluate.main([str(multirun / "seed=0"), "episodes=2", *QUICK, f"output={output}"]) == 2
    assert capsys.readouterr().err == (
        f"error: output={output} cannot be used: the disk of {output} has 0 bytes free, and "
        "about 4,224 are needed\n"
    )
    assert [path.name for path in output.iterdir()] == ["filling"]


def test_a_disk_that_fills_during_the_evaluation_leaves_the_earlier_report_whole(
    multirun, small_file_system, monkeypatch, capsys
):
    output = small_file_system(2**20)
    earlier = {"evaluation_noop.json": b'{"runs": []}\n', "evaluation_noop.csv": b"game\n"}
    for name, data in earlier.items():
        (output / name).write_bytes(data)
    evaluate_run = evaluate.evaluate_run

    def evaluate_then_fill(*arguments):
        score = evaluate_run(*arguments)
        fill(output)
        return score

    monkeypatch.setattr(evaluate, "evaluate_run", evaluate_then_fill)
    assert evaluate.main([str(multirun / "seed=0"), "episodes=1", *QUICK, f"output={output}"]) == 1
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert error.splitlines()[-1] == (
        f"error: could not write {output}/evaluation_noop.json and evaluation_noop.csv: No space "
        "left on device; neither was written (make room, or give output= on another disk, and "
        "evaluate again)"
    )
    assert {path.name: path.read_bytes() for path in output.iterdir() if path.name in earlier} == (
        earlier
    )
    assert sorted(path.name for path in output.iterdir()) == sorted([*earlier, "filling"])
