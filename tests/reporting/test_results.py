"""Exported runs read back (`reporting.results`): what `export` wrote from TensorBoard events is
what every report reads, value for value; runs are split by family and grouped by setting
(`reporting.report`)."""

from pathlib import Path

import numpy as np
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from reporting.__main__ import main
from reporting.report import by_setting
from reporting.results import ATARI_FAMILY, read_runs


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
    (run,), notes = read_runs(tmp_path / "results", ATARI_FAMILY)
    assert notes == []
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
    (run,), _ = read_runs(tmp_path / "results", ATARI_FAMILY)
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
    found, notes = read_runs(root, ATARI_FAMILY)
    assert notes == ["1 minatar run(s) left out (not Atari): python -m reporting minatar"]
    groups, notes = by_setting(found)
    named = {
        (g.game, g.name): [r.info.path.relative_to(root).as_posix() for r in g.runs] for g in groups
    }
    # By seed, then path; a run with the setting and seed of one kept is a repeat, not a seed.
    assert named == {
        ("breakout", "uniform"): ["e/seed0"],
        ("pong", "dqn-uniform"): ["d/seed0"],
        ("pong", "uniform"): ["c/seed0", "a/seed1"],
    }
    assert notes == [
        f"{root / 'b/seed1'}: the same settings and seed as {root / 'a/seed1'}, left out (only "
        "seeds are pooled)"
    ]


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
    found, _ = read_runs(tmp_path, ATARI_FAMILY)
    groups, notes = by_setting(found)
    named = {group.name: [run.info.path.name for run in group.runs] for group in groups}
    assert named == {
        "proportional agent.lr=1 agent.note=unset": ["a", "b"],
        "proportional agent.lr=0.5 agent.note=unset": ["c"],
        "proportional agent.lr=0.5 agent.note=null": ["d"],
        "proportional": ["e"],
        "uniform": ["f"],
    }
    assert notes == []


def beta_config(seed: int, kind: str = "proportional", total_steps: int = 2_500_000, **changes):
    """A Breakout config with the paper's β schedule (0.4 -> 1, or 0 throughout for uniform
    replay) that reaches its end at `replay.importance_exponent_final_step`, and `changes` by
    dotted key; without that key, as configs were written before it existed."""
    beta = (0.4, 1.0) if kind != "uniform" else (0.0, 0.0)
    config = {
        "seed": seed,
        "env": {"game": "breakout", "frame_skip": 4},
        "replay": {
            "kind": kind,
            "importance_exponent": beta[0],
            "importance_exponent_final": beta[1],
        },
        "train": {"total_steps": total_steps},
        "evaluation": {"every_frames": 1_000_000 if total_steps > 500_000 else 200_000},
    }
    for key, value in changes.items():
        section, name = key.split(".")
        config.setdefault(section, {})[name] = value
    return config


def test_only_seeds_are_pooled_and_a_group_is_named_by_what_sets_it_apart(tmp_path):
    """β on the run's clock (null: named by its last step) or the paper's (50M), DQN Zoo's ε (a
    variant of its own), two budgets: each its own group. An older config without those keys
    reads as what it ran with (`artifacts.upgrade`), and β's end step is no difference where β
    is constant."""
    paper_clock = {"replay.importance_exponent_final_step": 50_000_000}
    runs = {
        "run_clock/seed0": beta_config(0),  # from before the keys: null and false
        "paper_clock/seed0": beta_config(0, **paper_clock),
        "paper_clock/seed1": beta_config(1, **paper_clock, **{"agent.keep_maximum_step": False}),
        "keep_maximum/seed0": beta_config(0, **paper_clock, **{"agent.keep_maximum_step": True}),
        "budget_2m/seed0": beta_config(0, total_steps=500_000),
        "uniform/seed0": beta_config(0, "uniform"),
        "uniform/seed1": beta_config(1, "uniform", **paper_clock),
        "dopamine/seed0": beta_config(0, "uniform", **{"agent.target_rule": "dqn"}),
    }
    for name, run_config in runs.items():
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "config.yaml").write_text(OmegaConf.to_yaml(run_config))
        steps = run_config["train"]["total_steps"]
        header = "step,frames,episodes,mean_score,normalized_score,episode_scores"
        (tmp_path / name / "evaluations.csv").write_text(f"{header}\n{steps},{4 * steps},1,2,,\n")
    groups, notes = by_setting(read_runs(tmp_path, ATARI_FAMILY)[0])
    named = {
        group.name: [str(run.info.path.relative_to(tmp_path)) for run in group.runs]
        for group in groups
    }
    apart = "proportional replay.importance_exponent_final_step={}"
    assert named == {
        f"{apart.format(2500000)} train.total_steps=2500000": ["run_clock/seed0"],
        f"{apart.format(50000000)} train.total_steps=2500000": [
            "paper_clock/seed0",
            "paper_clock/seed1",
        ],
        "proportional-keep_maximum_step": ["keep_maximum/seed0"],
        # Alone at its budget: named by it, not by its budget preset's test period.
        "proportional train.total_steps=500000": ["budget_2m/seed0"],
        "uniform": ["uniform/seed0", "uniform/seed1"],
        "dqn-uniform": ["dopamine/seed0"],
    }
    assert notes == []
    # The published report: its budget column names the budget.
    text = main(["published", str(tmp_path), "--out", str(tmp_path / "report")]).read_text()
    assert f"| Breakout | {apart.format(50000000)} | 2 (0, 1) | 10M frames" in text
    assert f"| Breakout | {apart.format(2500000)} | 1 (0) | 10M frames" in text
    assert "| Breakout | proportional | 1 (0) | 2M frames" in text
    # Its evaluations after training: each run named by its group as well.
    for seed in (0, 1):
        row = f"| Breakout | {apart.format(50000000)} | {seed} | 10M frames | not evaluated"
        assert row in text
