"""The settings' defaults as Hydra configs: configs/ builds each section on its schema's
defaults through the defaults lists (`- /agent_settings@_here_`, ...), so that a default is
written once, in its schema. Whatever composes configs/ stores them first (train.py, the tests'
compose API in tests/conftest.py). Each replay and env kind has its own, named after it."""

from hydra.core.config_store import ConfigStore

from agents.settings import AgentSettings
from envs.registry import ENVIRONMENTS
from replay.registry import SAMPLERS
from training.settings import CheckpointSettings, EvaluationSettings, RunSettings, TrainSettings


def register_defaults() -> None:
    """Store each config, untyped: a value of the wrong type then reaches the project's own
    one-line refusal instead of Hydra's."""
    schemas = (RunSettings, TrainSettings, EvaluationSettings, CheckpointSettings, AgentSettings)
    kinds = {
        **{f"{kind}_replay_settings": (kind, s.settings) for kind, s in SAMPLERS.items()},
        **{f"{kind}_env_settings": (kind, env.settings) for kind, env in ENVIRONMENTS.items()},
    }
    configs = {
        **{f"{schema.section or 'run'}_settings": schema.defaults() for schema in schemas},
        # A schema of several kinds (both Atari kinds) gives each its own name.
        **{name: {**schema.defaults(), "kind": kind} for name, (kind, schema) in kinds.items()},
        # Schaul et al. (2016) divide the step size by 4 for prioritized replay: the prioritized
        # presets build their agent section on this (`- /prioritized_agent_settings@agent`).
        "prioritized_agent_settings": {"learning_rate": AgentSettings.learning_rate / 4},
    }
    for name, values in configs.items():
        ConfigStore.instance().store(name=name, node=values)
