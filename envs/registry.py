"""The environments by name: `env.kind` in the config. A new environment is a factory building a
`TrainingEnv` from its settings' schema, one `EnvironmentKind` here and one
`configs/env/<kind>.yaml`; the contract tests (tests/envs/test_env_contract.py) play it."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envs.atari import atari_env
from envs.games import resolve_game
from envs.interface import TrainingEnv
from envs.lean_atari import LeanAtariEnv
from envs.minatar import MinAtarEnv, minatar_frame_shape, resolve_minatar_game
from envs.settings import ENVIRONMENTS, KIND, AtariSettings, MinAtarSettings
from schema import Settings, typed


@dataclass(frozen=True)
class EnvironmentKind:
    """What the application needs to know of an environment before building it. `game_id` is
    a game's canonical name (what run configs store), or a one-line ValueError naming
    `env.game`; Atari kinds share a `family`: reference scores, human starts, result folders."""

    make: Callable[[Settings, int], TrainingEnv]
    settings: type[Settings]
    game_id: Callable[[str], str]
    frame_shape: Callable[[Settings], tuple[int, ...]]
    family: str
    has_human_reference: bool


_ATARI = {
    "settings": AtariSettings,
    "game_id": lambda name: resolve_game(name).rom_id,
    "frame_shape": lambda settings: (settings.screen_size,) * 2,
    "family": "atari",
}
ENVIRONMENTS.update(
    {
        "atari": EnvironmentKind(atari_env, **_ATARI, has_human_reference=True),
        "lean_atari": EnvironmentKind(LeanAtariEnv, **_ATARI, has_human_reference=True),
        "minatar": EnvironmentKind(
            MinAtarEnv,
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
    """An env section read by its kind's schema (the paper's Atari where none is named)."""
    return typed(environment_kind(values.get("kind", DEFAULT_KIND)).settings, values)


def build_env(settings: Settings, seed: int) -> TrainingEnv:
    return environment_kind(settings.kind).make(settings, seed)
