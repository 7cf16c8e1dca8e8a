"""The environments by name: `env.kind` in the config. A new environment is a factory building a
`TrainingEnv` from its settings' schema, one `EnvironmentKind` here and one
`configs/env/<kind>.yaml`; the contract tests (tests/envs/test_env_contract.py) play it."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from envs.atari import atari_env
from envs.games import resolve_game
from envs.lean_atari import LeanAtariEnv
from envs.minatar import MinAtarEnv, minatar_frame_shape, resolve_minatar_game
from envs.settings import ENVIRONMENTS, KIND, AtariSettings, MinAtarSettings
from schema import Settings, typed


class TrainingEnv(Protocol):
    """What the training loop needs of one game, as single preprocessed frames. `info` carries
    `life_lost` (the game goes on) and `episode_frame_number` (emulator frames since the reset);
    `capture_state` and `restore_state` make a checkpointed run continue exactly."""

    action_space: Any  # a discrete space: `action_space.n` actions

    def reset(self, *, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]: ...

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]: ...

    def noops_after_life_loss(self) -> tuple[np.ndarray, bool, dict[str, Any]]: ...

    def capture_state(self) -> dict[str, Any]: ...

    def restore_state(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


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
