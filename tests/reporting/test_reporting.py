"""`python -m reporting` on a fake multirun: 2 games × 2 variants × 2 seeds of synthetic
TensorBoard curves whose statistics are worked out by hand below."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from reporting import curves
from reporting.__main__ import main

TOTAL_STEPS = 1000
# score at evaluation k (k = 1..10, step 100 k) is BASE + SLOPE · k + seed.
BASE = {"pong": -21.0, "breakout": 0.0}
SLOPE = {
    ("pong", "uniform"): 2.0,
    ("pong", "proportional"): 4.0,
    ("breakout", "uniform"): 3.0,
    ("breakout", "proportional"): 10.0,
}


def write_run(run_dir: Path, game: str, kind: str, seed: int, scalars: dict, **replay) -> None:
    run_dir.mkdir(parents=True)
    config = {
        "seed": seed,
        "env": {"game": game, "frame_skip": 4},
        "replay": {"kind": kind, **replay},
        "train": {"total_steps": TOTAL_STEPS},
    }
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()
    (run_dir / "agent_final.pt").write_bytes(b"")  # finished: its final snapshot is written


def fake_multirun(root: Path, with_eval: bool = True) -> Path:
    for (game, kind), slope in SLOPE.items():
        for seed in (0, 1):
            evaluations = [(100 * k, BASE[game] + slope * k + seed) for k in range(1, 11)]
            returns = [(37 * k, BASE[game] + seed) for k in range(1, 27)]
            scalars = {"episode/return": returns, "train/loss": [(100, 0.5)]}
            if with_eval:
                scalars["eval/score"] = evaluations
            write_run(
                root / f"env.game={game},replay={kind},seed={seed}", game, kind, seed, scalars
            )
    (root / "multirun.yaml").write_text("hydra: {}\n")
    return root


def test_report_numbers_from_test_evaluations(tmp_path):
    multirun = fake_multirun(tmp_path / "multirun")
    main([str(multirun), "--out", str(tmp_path / "report")])
    text = (tmp_path / "report" / "report.md").read_text()
    assert "scores are test evaluations (`eval/score`" in text and "on 10 points" in text
    # Median of seeds 0 and 1 is BASE + SLOPE k + 0.5. Pong no-op: random −20.7, human 14.6.
    # Proportional ends at 19.5: (19.5 + 20.7) / 35.3 = 113.9 % of human; uniform's best is
    # −0.5, so 40.2 / 20.2 = 199.0 % of uniform, first matched at k = 5 (4k + 0.2 ≥ 20.2).
    assert "| Pong | uniform | 2 | -0.5 | -0.5 | 57.2 % | 57.2 % | 100.0 % | 100.0 % |" in text
    assert (
        "| Pong | proportional | 2 | 19.5 | 19.5 | 113.9 % | 113.9 % | 199.0 % | 50.0 % |" in text
    )
    # Breakout no-op: random 1.7, human 30.5; proportional matches 30.5 at k = 3.
    assert (
        "| Breakout | proportional | 2 | 100.5 | 100.5 | 343.1 % | 343.1 % | 343.1 % | 30.0 % |"
    ) in text
    # Figure 4, median (= mean of two) over games: best so far (4k + 0.2)/20.2 and
    # (10k − 1.2)/28.8 first average ≥ 1 at k = 4; mean so far (2(k+1) + 0.2)/11.2 and
    # (5(k+1) − 1.2)/15.3 also at k = 4; at the end 271.0 % and 274.9 %.
    assert "| proportional | 2 | 271.0 % | 40.0 % | 274.9 % | 40.0 % |" in text
    assert "| uniform | 2 | 100.0 % | 100.0 % | 100.0 % | 100.0 % |" in text
    for name in ("learning_curves_pong.png", "learning_curves_breakout.png", "learning_speed.png"):
        assert (tmp_path / "report" / name).read_bytes().startswith(b"\x89PNG")
        assert f"![{name}]({name})" in text


def test_training_returns_are_the_fallback_without_test_evaluations(tmp_path):
    multirun = fake_multirun(tmp_path / "multirun", with_eval=False)
    main([str(multirun)])
    text = (multirun / "report" / "report.md").read_text()
    assert "training episode returns (`episode/return`" in text and "on 50 points" in text
    # Every return of a run is BASE + seed: the medians are BASE + 0.5.
    assert "| Pong | proportional | 2 | -20.5 | -20.5 |" in text


def test_a_run_without_the_chosen_tag_is_left_out_with_a_note(tmp_path):
    multirun = fake_multirun(tmp_path / "multirun")
    write_run(multirun / "crashed", "pong", "uniform", 7, {"episode/return": [(10, -21.0)]})
    main([str(multirun)])
    text = (multirun / "report" / "report.md").read_text()
    assert "crashed: no `eval/score` scalars, left out" in text
    assert "| Pong | uniform | 2 |" in text


def test_empty_directory_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path)])
    assert exit_info.value.code == 2
    assert "holds no run" in capsys.readouterr().err


def test_binning_averages_per_slice_and_carries_the_last_value():
    curve = curves.binned(np.array([0, 10, 20, 95]), np.array([1.0, 3.0, 5.0, 7.0]), 100, 4)
    np.testing.assert_array_equal(curve, [3.0, 3.0, 3.0, 7.0])
    late = curves.binned(np.array([60]), np.array([2.0]), 100, 4)
    np.testing.assert_array_equal(late, [np.nan, np.nan, 2.0, 2.0])


def test_without_uniform_runs_there_is_no_learning_speed_summary(tmp_path):
    multirun = fake_multirun(tmp_path / "multirun")
    for run_dir in multirun.glob("*replay=uniform*"):
        (run_dir / "config.yaml").unlink()
    main([str(multirun)])
    text = (multirun / "report" / "report.md").read_text()
    assert "no game has a uniform baseline" in text and "| Pong | proportional | 2 |" in text
    assert not (multirun / "report" / "learning_speed.png").exists()


def test_variants_of_one_replay_kind_are_reported_apart(tmp_path):
    multirun = fake_multirun(tmp_path / "multirun")
    for run_dir in multirun.glob("env.game=pong,replay=uniform*"):
        config = OmegaConf.load(run_dir / "config.yaml")
        config.agent = {"target_rule": "dqn"}
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    main([str(multirun)])
    text = (multirun / "report" / "report.md").read_text()
    # Pong's DQN-target runs are their own variant; Pong then has no uniform baseline.
    assert "| Pong | dqn-uniform | 2 | -0.5 | -0.5 | 57.2 % | 57.2 % | – | – |" in text
    assert "| Pong | proportional | 2 | 19.5 | 19.5 | 113.9 % | 113.9 % | – | – |" in text
    assert "| Pong | uniform |" not in text
    assert "| Breakout | uniform | 2 |" in text


def test_runs_of_another_family_are_left_out_with_a_note(tmp_path):
    multirun = fake_multirun(tmp_path / "multirun")
    config = {
        "seed": 0,
        "env": {"kind": "minatar", "game": "breakout", "frame_skip": 1},
        "replay": {"kind": "uniform"},
        "train": {"total_steps": TOTAL_STEPS},
    }
    run_dir = multirun / "minatar_run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    main([str(multirun)])
    text = (multirun / "report" / "report.md").read_text()
    assert "- 1 minatar run(s) left out: none has a training episode to report" in text
    assert "| Breakout | uniform | 2 |" in text
    # With training episodes, the MinAtar run has its own report beside the Atari one.
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    writer.add_scalar("episode/return", 3.0, 500)
    writer.close()
    main([str(multirun)])
    text = (multirun / "report" / "report.md").read_text()
    assert "- 1 minatar run(s): not Atari, reported in minatar/report.md" in text
    minatar_text = (multirun / "report" / "minatar" / "report.md").read_text()
    assert "![minatar_breakout.png](minatar_breakout.png)" in minatar_text


def test_a_two_key_sweep_is_reported_by_its_keys_and_pools_only_seeds(tmp_path):
    """α × seed on Pong: each α is a row of its two seeds, not one variant of four 'seeds'."""
    multirun = tmp_path / "multirun"
    for alpha, slope in ((0.4, 2.0), (0.6, 4.0)):
        for seed in (0, 1):
            evaluations = [(100 * k, BASE["pong"] + slope * k + seed) for k in range(1, 11)]
            run_dir = multirun / f"replay.priority_exponent={alpha},seed={seed}"
            scalars = {"eval/score": evaluations}
            write_run(run_dir, "pong", "proportional", seed, scalars, priority_exponent=alpha)
    # One run recorded what made it; the others are from before runs did.
    commit = "84135fbdded95fec19458f5ef325911020e29640"
    (multirun / "replay.priority_exponent=0.4,seed=0" / "provenance.yaml").write_text(
        f"starts:\n- {{step: 0, commit: {commit}, dirty: false, python: 3.11.7}}\n"
    )
    # The same setting and seed again (a copy): not a third seed.
    copy = multirun / "copy" / "replay.priority_exponent=0.6,seed=1"
    shutil.copytree(multirun / copy.name, copy)
    main([str(multirun), "--out", str(tmp_path / "report")])
    text = (tmp_path / "report" / "report.md").read_text()
    # Medians over seeds 0 and 1: −21 + 10 slope + 0.5 at the end.
    assert (
        "| Pong | proportional replay.priority_exponent=0.4 | 2 | -0.5 | -0.5 | 57.2 % | 57.2 % "
        "| – | – | 84135fb; unknown |"
    ) in text
    assert (
        "| Pong | proportional replay.priority_exponent=0.6 | 2 | 19.5 | 19.5 | 113.9 % | "
        "113.9 % | – | – | unknown |"
    ) in text
    assert "| Pong | proportional |" not in text
    assert (
        f"- {multirun / copy.name}: the same settings and seed as {copy}, left out (only seeds "
        "are pooled)"
    ) in text
    # The runs reported: the copy left out is not counted.
    assert "| 84135fb | python 3.11.7 | 1 |" in text and "| unknown | unknown | 3 |" in text
