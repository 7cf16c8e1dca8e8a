"""Variant names, and `python -m reporting export` of runs of another family than Atari: a
MinAtar run goes below OUT/minatar/<game>/<variant>/, without human-normalized scores; an Atari
run with the paper's settings keeps OUT/<game>/<replay kind>/."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from artifacts.run_directory import RunDirectory
from reporting.__main__ import main


def write_config(run_dir: Path, config: dict) -> RunDirectory:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    return RunDirectory(run_dir)


def minatar_config(kind: str, target_rule: str | None = None, **replay) -> dict:
    agent = {} if target_rule is None else {"target_rule": target_rule}
    return {
        "seed": 2,
        "env": {"kind": "minatar", "game": "SpaceInvaders", "frame_skip": 1},
        "agent": agent,
        "replay": {"kind": kind, **replay},
        "train": {"total_steps": 1_000},
    }


@pytest.mark.parametrize(
    "kind, target_rule, replay, variant",
    [
        ("uniform", "dqn", {}, "dqn-uniform"),
        ("proportional", "dqn", {"priority_signal": "huber_loss"}, "dqn-proportional-huber_loss"),
        ("proportional", "dqn", {"priority_signal": "td_error"}, "dqn-proportional"),
        ("rank_based", "dqn", {"eviction": "fifo"}, "dqn-rank_based"),
        ("uniform", "double_dqn", {}, "uniform"),
        ("proportional", None, {"eviction": "lowest_priority"}, "proportional-lowest_priority"),
        (
            "rank_based",
            "dqn",
            {"priority_signal": "td_error_change", "eviction": "lowest_priority"},
            "dqn-rank_based-td_error_change-lowest_priority",
        ),
    ],
)
def test_the_variant_names_what_differs_from_the_paper(
    tmp_path, kind, target_rule, replay, variant
):
    run = write_config(tmp_path / "run", minatar_config(kind, target_rule, **replay))
    assert run.variant == variant


def test_dqn_zoos_reading_of_the_reduced_step_size_is_named(tmp_path):
    config = minatar_config("proportional")
    config["agent"]["keep_maximum_step"] = True
    assert write_config(tmp_path / "run", config).variant == "proportional-keep_maximum_step"


def test_a_config_from_before_the_settings_is_named_by_its_kind(tmp_path):
    config = {"env": {"game": "pong"}, "replay": {"kind": "rank_based"}}
    run = write_config(tmp_path / "run", config)
    assert (run.variant, run.family) == ("rank_based", "atari")
    assert write_config(tmp_path / "other", {"env": {"game": "pong"}}).variant is None


def write_events(run: RunDirectory, returns, evaluations) -> None:
    """The run's events, and its final snapshot: it finished."""
    run.final_snapshot.write_bytes(b"not exported")
    writer = SummaryWriter(str(run.tensorboard))
    for step, value in returns:
        writer.add_scalar("episode/return", value, step)
    for step, score in evaluations:
        writer.add_scalar("eval/score", score, step)
        writer.add_scalar("eval/episodes", 1, step)
        writer.add_text("eval/episode_scores", f"[{score}]", step)
    writer.close()


def test_a_minatar_run_is_exported_below_its_family(tmp_path):
    config = minatar_config("proportional", "dqn", priority_signal="huber_loss")
    minatar = write_config(tmp_path / "runs/minatar_run", config)
    write_events(minatar, [(120, 3.0), (470, 5.5), (990, 4.0)], [(500, 6.0), (1_000, 7.0)])
    atari = write_config(
        tmp_path / "runs/atari_run",
        {
            "seed": 0,
            "env": {"kind": "atari", "game": "Breakout", "frame_skip": 4},
            "agent": {"target_rule": "double_dqn"},
            "replay": {"kind": "uniform", "priority_signal": "td_error", "eviction": "fifo"},
            "train": {"total_steps": 1_000},
        },
    )
    write_events(atari, [(200, 2.0)], [(1_000, 4.0)])
    provenance = "starts:\n- step: 0\n  commit: 84135fbdded95fec19458f5ef325911020e29640\n"
    atari.provenance_file.write_text(provenance)
    results = tmp_path / "results"
    main(["export", str(tmp_path / "runs"), "--out", str(results)])
    exported = results / "minatar/space_invaders/dqn-proportional-huber_loss/seed2_1k"
    assert sorted(path.name for path in exported.iterdir()) == [
        "config.yaml",
        "evaluations.csv",
        "provenance.yaml",
        "trained.yaml",
        "training_returns.csv",
    ]
    # One agent step is one MinAtar frame; no human reference, so no normalized score.
    assert (exported / "training_returns.csv").read_text() == (
        "step,frames,return\n120,120,3\n470,470,5.5\n990,990,4\n"
    )
    assert (exported / "evaluations.csv").read_text() == (
        "step,frames,episodes,mean_score,normalized_score,episode_scores\n"
        "500,500,1,6,,6\n"
        "1000,1000,1,7,,7\n"
    )
    # Atari's Breakout: random 1.7, human 30.5 (no-op); (4 − 1.7) / 28.8 = 0.079861111.
    atari_export = results / "breakout/uniform/seed0_4k"
    assert (atari_export / "evaluations.csv").read_text().endswith("1000,4000,1,4,0.07986111,4\n")
    # What made each run: copied where the run recorded it, else unknown, never guessed.
    assert (atari_export / "provenance.yaml").read_text() == provenance
    assert RunDirectory(atari_export).provenance.code == "84135fb"
    assert (exported / "provenance.yaml").read_text().startswith("# Not recorded: the run was ")
    assert RunDirectory(exported).provenance.code == "unknown"
