"""Exported runs read back (`reporting.results`): what `export` wrote from TensorBoard events is
what every report reads, value for value; runs are split by family and grouped by variant."""

from pathlib import Path

import numpy as np
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from reporting.__main__ import main
from reporting.results import ATARI_FAMILY, by_setting, by_variant, read_results


def write_run(run_dir: Path, config: dict, scalars: dict) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()


def config(game: str, kind: str, seed: int, **agent) -> dict:
    return {
        "seed": seed,
        "env": {"game": game, "frame_skip": 4},
        "agent": agent,
        "replay": {"kind": kind},
        "train": {"total_steps": 1_000},
    }


def test_the_exported_values_are_the_logged_ones_read_as_their_decimals(tmp_path):
    # 37/3 is stored as float32 12.333333015…; the export writes 12.333333, read back as that.
    tests = [(250, 37 / 3), (500, -20.0), (1_000, 0.1)]
    returns = [(10, -21.0), (400, 2.5)]
    write_run(
        tmp_path / "runs/a",
        config("pong", "uniform", 0),
        {"eval/score": tests, "episode/return": returns},
    )
    main(["export", str(tmp_path / "runs"), "--out", str(tmp_path / "results")])
    (run,), others = read_results(tmp_path / "results", ATARI_FAMILY)
    assert others == {}
    np.testing.assert_array_equal(run.tests.steps, [250, 500, 1_000])
    np.testing.assert_array_equal(run.tests.frames, [1_000, 2_000, 4_000])
    np.testing.assert_array_equal(run.tests.values, [12.333333, -20.0, 0.1])
    np.testing.assert_array_equal(run.returns.frames, [40, 1_600])
    np.testing.assert_array_equal(run.returns.values, [-21.0, 2.5])


def test_a_run_without_its_files_reads_as_none(tmp_path):
    run_dir = tmp_path / "results/pong/uniform/seed0_4k"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config("pong", "uniform", 0)))
    (run_dir / "training_returns.csv").write_text("step,frames,return\n")
    (run,), _ = read_results(tmp_path / "results", ATARI_FAMILY)
    assert run.tests is None and run.returns.size == 0


def test_runs_are_split_by_family_and_grouped_by_variant_then_seed(tmp_path):
    root = tmp_path / "results"
    runs = {
        "b/seed1": config("pong", "uniform", 1),
        "a/seed1": config("pong", "uniform", 1),
        "c/seed0": config("pong", "uniform", 0),
        "d/seed0": config("pong", "uniform", 0, target_rule="dqn"),
        "e/seed0": config("breakout", "uniform", 0),
    }
    minatar = config("breakout", "uniform", 0)
    minatar["env"] = {"kind": "minatar", "game": "breakout", "frame_skip": 1}
    runs["minatar/seed0"] = minatar
    for name, run_config in runs.items():
        (root / name).mkdir(parents=True)
        (root / name / "config.yaml").write_text(OmegaConf.to_yaml(run_config))
    found, others = read_results(root, ATARI_FAMILY)
    assert others == {"minatar": 1}
    groups = by_variant(found)
    assert sorted(groups) == [("breakout", "uniform"), ("pong", "dqn-uniform"), ("pong", "uniform")]
    pong = [run.info.path.relative_to(root).as_posix() for run in groups["pong", "uniform"]]
    assert pong == ["c/seed0", "a/seed1", "b/seed1"]


def test_a_setting_is_a_variant_and_the_values_varied_between_its_runs_of_a_game(tmp_path):
    runs = {
        "a": config("pong", "proportional", 0, lr=1),
        "b": config("pong", "proportional", 1, lr=1.0),  # the same value
        "c": config("pong", "proportional", 0, lr=0.5),
        "d": config("pong", "proportional", 0, lr=0.5, note=None),
        "e": config("breakout", "proportional", 0, lr=2),  # another game: its own runs
        "f": config("pong", "uniform", 0, lr=3),
    }
    for name, run_config in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(OmegaConf.to_yaml(run_config))
    found, _ = read_results(tmp_path, ATARI_FAMILY)
    groups, notes = by_setting(found)
    named = {
        setting.name: [run.info.path.name for run in members] for setting, members in groups.items()
    }
    assert named == {
        "proportional agent.lr=1 agent.note=unset": ["a", "b"],
        "proportional agent.lr=0.5 agent.note=unset": ["c"],
        "proportional agent.lr=0.5 agent.note=null": ["d"],
        "proportional": ["e"],
        "uniform": ["f"],
    }
    assert notes == []
