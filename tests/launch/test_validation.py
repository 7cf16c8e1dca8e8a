"""The up-front checks of a run's settings that no schema makes alone: the replay's device."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from launch import validation

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")


def config(*overrides: str):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_a_storage_that_forgets_by_priority_keeps_its_frames_on_the_host():
    with pytest.raises(ValueError) as error:
        validation.validate_config(
            config("replay.device=cuda", "replay.eviction=lowest_priority", "agent.device=cpu")
        )
    assert str(error.value) == (
        "replay.device=cuda is not allowed: must be cpu, or agent.device's CUDA device with "
        "replay.eviction=fifo"
    )
