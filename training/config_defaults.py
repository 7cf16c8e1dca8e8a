"""The settings' defaults as Hydra configs: configs/ builds each section on its schema's
defaults through the defaults lists (`- /agent_settings@_here_`, ...), so that a default is
written once, in its schema. Hydra stores them at every start (hydra_plugins/per_atari). Each
replay kind and env kind has its own, named after it, so that a new sampler or environment
needs no line here."""

from hydra.core.config_store import ConfigStore

from agents.settings import AgentSettings
from envs.registry import ENVIRONMENTS
from replay.registry import SAMPLERS
from schema import Schema
from training.settings import CheckpointSettings, EvaluationSettings, RunSettings, TrainSettings


def default_configs() -> dict[str, type[Schema]]:
    """Hydra config name -> the schema whose defaults it holds."""
    return {
        "run_settings": RunSettings,
        "train_settings": TrainSettings,
        "evaluation_settings": EvaluationSettings,
        "checkpoint_settings": CheckpointSettings,
        "agent_settings": AgentSettings,
        **{f"{kind}_replay_settings": sampler.settings for kind, sampler in SAMPLERS.items()},
        **{f"{kind}_env_settings": env.settings for kind, env in ENVIRONMENTS.items()},
    }


def register_defaults() -> None:
    """Store each schema's defaults as its Hydra config, untyped: a value of the wrong type
    then reaches the project's own one-line refusal instead of Hydra's."""
    for name, schema in default_configs().items():
        ConfigStore.instance().store(name=name, node=schema.defaults())
