"""The environments by name: `env.kind` in the config. A new environment is one module with a
factory like `envs.atari.atari_env` (building a `TrainingEnv` from its settings) and the
schema of those settings (like `envs.settings`'), one `EnvironmentKind` here and one
`configs/env/<kind>.yaml` on that schema's defaults (`- /<kind>_env_settings@_here_`:
`launch.config_defaults`); the contract tests (tests/envs/test_env_contract.py) play it
unchanged."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envs.atari import atari_env
from envs.games import resolve_game
from envs.interface import TrainingEnv
from envs.lean_atari import lean_atari_env
from envs.minatar import minatar_env, minatar_frame_shape, resolve_minatar_game
from envs.settings import ENVIRONMENTS, KIND, AtariSettings, MinAtarSettings
from schema import Settings, typed


@dataclass(frozen=True)
class EnvironmentKind:
    """What the application needs to know of an environment before building it.

    `make(settings, seed)` builds it from an `env` section read by its schema `settings`;
    `game_id(name)` is the canonical name of a game
    (what run configs store), or a one-line ValueError naming `env.game`; `frame_shape(settings)`
    is the shape of one frame; `family` names the games (Atari kinds share human reference
    scores, human starts and result folders; `has_human_reference` says whether they exist).
    """

    make: Callable[[Settings, int], TrainingEnv]
    settings: type[Settings]
    game_id: Callable[[str], str]
    frame_shape: Callable[[Settings], tuple[int, ...]]
    family: str
    has_human_reference: bool


def _atari_game_id(name: str) -> str:
    return resolve_game(name).rom_id


def _atari_frame_shape(settings: Settings) -> tuple[int, int]:
    return (settings.screen_size,) * 2


_ATARI = {
    "settings": AtariSettings,
    "game_id": _atari_game_id,
    "frame_shape": _atari_frame_shape,
    "family": "atari",
}
ENVIRONMENTS.update(
    {
        "atari": EnvironmentKind(atari_env, **_ATARI, has_human_reference=True),
        "lean_atari": EnvironmentKind(lean_atari_env, **_ATARI, has_human_reference=True),
        "minatar": EnvironmentKind(
            minatar_env,
            settings=MinAtarSettings,
            game_id=resolve_minatar_game,
            frame_shape=lambda settings: minatar_frame_shape(settings.game),
            family="minatar",
            has_human_reference=False,
        ),
    }
)


DEFAULT_KIND = "atari"  # the paper's games: where no run config names a kind


def environment_kind(kind: str) -> EnvironmentKind:
    """The kind named `kind`, or a one-line ValueError naming `env.kind` (its rule's)."""
    KIND.check("env.kind", kind)
    return ENVIRONMENTS[kind]


def env_settings(values: Mapping) -> Settings:
    """An env section (its `kind`, the paper's Atari where none, and settings of that kind's
    schema) read by the schema (`schema.typed`): a one-line ValueError names the first key
    not allowed."""
    return typed(environment_kind(values.get("kind", DEFAULT_KIND)).settings, values)


def build_env(settings: Settings, seed: int) -> TrainingEnv:
    """The env `settings.kind`, built from the section its schema read."""
    return environment_kind(settings.kind).make(settings, seed)
