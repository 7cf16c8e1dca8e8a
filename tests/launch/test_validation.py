"""The rules between settings: a schema's own sections', and those across sections, refused
before anything is built in one line naming the key and what is allowed."""

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


def test_a_compiled_update_with_per_sample_gradients_is_refused():
    """The parameter-change signal's per-sample gradients are computed eagerly: a compiled
    update cannot give them."""
    cfg = config("agent.torch_compile=true", "replay.priority_signal=parameter_change")
    with pytest.raises(ValueError) as error:
        validation.validate_config(cfg)
    assert str(error.value) == (
        "agent.torch_compile=true is not allowed with replay.priority_signal=parameter_change: "
        "its per-sample gradients are computed eagerly"
    )
    validation.validate_config(config("replay.priority_signal=parameter_change"))
