"""Runs too old to resume are refused in one line naming the version and what it lacks."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from artifacts.upgrade import check_resumable, upgrade_config
from launch.validation import validate_config

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
# config.yaml as the last revision before runs recorded their evaluation settings wrote it.
BEFORE_EVALUATION_SETTINGS = {
    "seed": 0,
    "resume": None,
    "train": {"total_steps": 50_000_000, "log_period_steps": 10_000},
    "checkpoint": {"every_steps": 250_000, "keep": 2},
    "env": {"game": "pong", "frame_skip": 4},
    "agent": {"history_length": 4, "learning_rate": 0.00025},
    "replay": {"kind": "uniform", "capacity": 1_000_000},
}
TOO_OLD = (
    "resume=runs/pong/uniform/old: the run was written by a version too old to resume (an "
    "early 0.1.0: its config.yaml has no evaluation.every_frames); runs that record their "
    "evaluation settings can be resumed"
)


def test_a_run_from_before_the_evaluation_settings_is_refused_naming_what_it_lacks():
    stored = upgrade_config({**BEFORE_EVALUATION_SETTINGS, "resume": "runs/pong/uniform/old"})
    with pytest.raises(ValueError) as error:
        check_resumable(stored)
    assert str(error.value) == TOO_OLD
    with pytest.raises(ValueError) as error:
        validate_config(OmegaConf.create(stored))
    assert str(error.value) == TOO_OLD


def test_a_fresh_run_without_a_setting_is_refused_by_its_name_not_as_too_old():
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose("config", ["~evaluation.every_frames"])
    with pytest.raises(ValueError) as error:
        validate_config(cfg)
    assert str(error.value) == "evaluation.every_frames is not set"
