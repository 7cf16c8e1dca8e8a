"""The environments by name: `env.kind` in the config. A new environment is one module with a
factory like `envs.atari.make_env` (returning a `TrainingEnv`), one line here and one
`configs/env/<kind>.yaml` whose keys are the factory's arguments."""

from collections.abc import Mapping

from envs.atari import make_env
from envs.interface import TrainingEnv
from envs.lean_atari import make_lean_env

ENVIRONMENTS = {"atari": make_env, "lean_atari": make_lean_env}
DEFAULT_KIND = "atari"  # what a run config without `env.kind` (older runs) was trained on


def build_env(settings: Mapping, seed: int) -> TrainingEnv:
    """The env `settings["kind"]` (default: atari), given the other settings as arguments."""
    arguments = dict(settings)
    kind = arguments.pop("kind", DEFAULT_KIND)
    if kind not in ENVIRONMENTS:
        allowed = ", ".join(ENVIRONMENTS)
        raise ValueError(f"env.kind={kind} is not allowed: must be one of {allowed}")
    return ENVIRONMENTS[kind](seed=seed, **arguments)
