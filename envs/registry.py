"""The environments by name: `env.kind` in the config. A new environment is one module with a
factory like `envs.atari.make_env` (returning a `TrainingEnv`) and the schema of its settings
(like `envs.settings`'), one `EnvironmentKind` here and one `configs/env/<kind>.yaml` on that
schema's defaults (`- /<kind>_env_settings@_here_`: `training.config_defaults`); the contract
tests (tests/envs/test_env_contract.py) play it unchanged."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envs.atari import make_env
from envs.games import resolve_game
from envs.interface import TrainingEnv
from envs.lean_atari import make_lean_env
from envs.minatar import make_minatar_env, minatar_frame_shape, resolve_minatar_game
from envs.settings import AtariSettings, MinAtarSettings
from schema import Schema, one_of


@dataclass(frozen=True)
class EnvironmentKind:
    """What the application needs to know of an environment before building it.

    `make(seed=..., **settings)` builds it from settings of its schema `settings` (the config's
    `env` section but `kind`); `game_id(name)` is the canonical name of a game
    (what run configs store), or a one-line ValueError naming `env.game`; `frame_shape(settings)`
    is the shape of one frame; `family` names the games (Atari kinds share human reference
    scores, human starts and result folders; `has_human_reference` says whether they exist).
    """

    make: Callable[..., TrainingEnv]
    settings: type[Schema]
    game_id: Callable[[str], str]
    frame_shape: Callable[[Mapping], tuple[int, ...]]
    family: str
    has_human_reference: bool


def _atari_game_id(name: str) -> str:
    return resolve_game(name).rom_id


def _atari_frame_shape(settings: Mapping) -> tuple[int, int]:
    return (settings["screen_size"],) * 2


_ATARI = {
    "settings": AtariSettings,
    "game_id": _atari_game_id,
    "frame_shape": _atari_frame_shape,
    "family": "atari",
}
ENVIRONMENTS: dict[str, EnvironmentKind] = {
    "atari": EnvironmentKind(make_env, **_ATARI, has_human_reference=True),
    "lean_atari": EnvironmentKind(make_lean_env, **_ATARI, has_human_reference=True),
    "minatar": EnvironmentKind(
        make_minatar_env,
        settings=MinAtarSettings,
        game_id=resolve_minatar_game,
        frame_shape=lambda settings: minatar_frame_shape(settings["game"]),
        family="minatar",
        has_human_reference=False,
    ),
}


DEFAULT_KIND = "atari"  # the paper's games: where no run config names a kind


def environment_kind(kind: str) -> EnvironmentKind:
    """The kind named `kind`, or a one-line ValueError naming `env.kind`."""
    one_of(ENVIRONMENTS).check("env.kind", kind)
    return ENVIRONMENTS[kind]


def env_settings(section: Mapping, complete: bool = False) -> Schema:
    """An env section (`kind` and the settings of its schema, `Schema.of`) as its kind's
    settings, every value checked: a one-line ValueError names the first key not allowed."""
    schema = environment_kind(section.get("kind")).settings
    return schema.of(section, also=("kind",), complete=complete)


def build_env(settings: Mapping, seed: int) -> TrainingEnv:
    """The env `settings["kind"]`, given the other settings as arguments."""
    arguments = dict(settings)
    return environment_kind(arguments.pop("kind", None)).make(seed=seed, **arguments)
