"""A run's stored config and checkpoint state, read back as this version writes them
(`artifacts.upgrade`): what was added since gets the value that continues the run as it ran;
and the directories a refused run removes."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from artifacts.provenance import code_state, read_starts
from artifacts.run_directory import RunDirectory
from artifacts.upgrade import upgrade_checkpoint_state
from launch import run_config
from launch.run_config import (
    load_stored_config,
    note_existing_directories,
    remove_created_directories,
)
from launch.validation import validate_config

ROOT = Path(__file__).resolve().parents[2]
# config.yaml of a run started by the code of 607a4c6-967999d: python train.py
# experiment=minatar_dqn env.game=breakout seed=0 threads=1
MINATAR_RUN_CONFIG = Path(__file__).parent / "data" / "minatar_dqn_config.yaml"
ADDED = {
    "agent": {
        "pipelined": False,
        "cuda_graphs": True,
        "torch_compile": False,
        "network": "nature",
        "target_rule": "double_dqn",
        "optimizer": "deepmind_rmsprop",
        "keep_maximum_step": False,
    },
    "evaluation": {"worker": False},
    "replay": {
        "priority_signal": "td_error",
        "priority_epsilon": 0.01,
        "eviction": "fifo",
        "device": "cpu",
        "importance_exponent_final_step": None,
    },
}


def test_a_config_from_before_later_settings_is_completed_as_it_ran(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "seed: 0\nenv:\n  game: Breakout\nreplay:\n  kind: rank_based\n  priority_exponent: 0.7\n"
        "train:\n  total_steps: 10\n  log_period_steps: 5\n"
    )
    stored = load_stored_config(path)
    assert OmegaConf.to_container(stored) == {
        **ADDED,
        "seed": 0,
        "threads": "auto",
        "env": {"game": "breakout", "kind": "atari"},
        "train": {"total_steps": 10, "log_period_steps": 5, "life_loss": "stop_bootstrap"},
        "replay": {
            **ADDED["replay"],
            "kind": "rank_based",
            "priority_exponent": 0.7,
            "priority_exponent_period_steps": 5,  # α changed once per log period
        },
    }


def test_settings_a_run_stored_are_kept(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "threads: 2\nenv:\n  game: pong\n  kind: lean_atari\ntrain:\n  life_loss: new_episode\n"
    )
    assert OmegaConf.to_container(load_stored_config(path)) == {
        **ADDED,
        "threads": 2,
        "env": {"game": "pong", "kind": "lean_atari"},
        "train": {"life_loss": "new_episode"},
    }


def test_a_run_stored_since_minatar_reads_as_this_version_composes_its_command_line():
    """What changed since: the default of agent.cuda_graphs (a setting a resume may change),
    and the preset's agent.torch_compile, which such a run keeps off, as it ran."""
    stored = load_stored_config(MINATAR_RUN_CONFIG)
    validate_config(OmegaConf.merge(stored, {"resume": "runs/minatar/breakout/uniform/seed0"}))
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        overrides = ["experiment=minatar_dqn", "env.game=breakout", "seed=0", "threads=1"]
        composed = OmegaConf.to_container(compose("config", overrides), resolve=True)
    composed.pop("resume")
    composed["agent"]["cuda_graphs"] = True
    composed["agent"]["torch_compile"] = False
    assert OmegaConf.to_container(stored) == composed


def test_a_config_from_before_a_setting_the_upgrade_cannot_complete_is_refused(tmp_path):
    """It would otherwise run at today's default of a setting it lacks
    (`evaluation.every_frames`, which the earliest runs did not record)."""
    path = tmp_path / "config.yaml"
    stored = OmegaConf.load(MINATAR_RUN_CONFIG)
    del stored.evaluation.every_frames
    OmegaConf.save(stored, path)
    with pytest.raises(ValueError) as error:
        validate_config(OmegaConf.merge(load_stored_config(path), {"resume": str(tmp_path)}))
    assert str(error.value) == (
        f"resume={tmp_path}: the run was written by a version too old to resume (an early "
        "0.1.0: its config.yaml has no evaluation.every_frames); runs that record their "
        "evaluation settings can be resumed"
    )


def test_a_checkpoint_state_from_before_later_fields_is_completed_as_it_ran(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    identity = {"env.kind": "atari", "replay.eviction": "fifo", "replay.kind": "uniform"}
    state = {"pending_test_step": 40, "replay": {"storage": {}}}
    upgraded = upgrade_checkpoint_state(state, identity)
    assert upgraded == {
        "identity": identity,  # none recorded: taken for the resuming run's own
        "torch_threads": 3,  # `threads: auto` ran as OMP_NUM_THREADS
        "pending_test_steps": [40],
        "learning": None,
        "next_action": None,  # every action was chosen at its own step
        "replay": {"storage": {}, "added_before_sample": None},
        "config": None,  # not recorded: it cannot be checked
        "changes": [],  # none recorded
    }
    recorded = {"env.kind": None, "replay.eviction": None, "replay.kind": "uniform"}
    state = {"identity": recorded, "torch_threads": 1, "pending_test_steps": [], "replay": {}}
    assert upgrade_checkpoint_state(state, identity)["identity"] == identity


def test_each_start_of_a_run_is_recorded_beside_its_config(tmp_path):
    run_dir = tmp_path / "run"
    run_config.record_run_config(run_dir, OmegaConf.create({"seed": 0, "resume": None}), ["ε: 1"])
    run_config.record_start(run_dir, 0)
    assert (run_dir / "config.yaml").read_text() == "# ε: 1\nseed: 0\n"
    assert OmegaConf.load(run_dir / "config.yaml") == {"seed": 0}  # the header is a comment
    run_config.record_start(run_dir, 100)  # resumed from its checkpoint at step 100
    starts = read_starts(run_dir / "provenance.yaml")
    assert [start["step"] for start in starts] == [0, 100]
    commit, dirty = code_state()
    assert all((start["commit"], start["dirty"]) == (commit, dirty) for start in starts)
    assert RunDirectory(run_dir).provenance.complete


def test_a_refused_run_removes_the_directories_it_created_and_only_those(tmp_path):
    (tmp_path / "made_before" / "empty_run").mkdir(parents=True)
    new_run, existing_run = tmp_path / "made_before" / "new" / "run", tmp_path / "made_before"
    existing_run /= "empty_run"
    for run_dir in (new_run, existing_run):  # as Hydra's callback does, before its mkdir -p
        note_existing_directories(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        remove_created_directories(run_dir)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == [
        Path("made_before"),
        Path("made_before/empty_run"),
    ]


def test_a_run_directory_no_one_noted_is_left_as_it_is(tmp_path):
    """A sweep's job refused by its own process cannot know what existed before the sweep."""
    run = tmp_path / "sweep" / "job"
    run.mkdir(parents=True)
    remove_created_directories(run)
    assert sorted(tmp_path.rglob("*")) == [tmp_path / "sweep", run]
