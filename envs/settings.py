"""The environments' settings (the config's `env` section beside `kind`, which chooses the
environment and so the schema: `envs.registry`). The game is any name the kind resolves to
its id (`EnvironmentKind.game_id`), which refuses the others."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from schema import BOOLEAN, FRACTION, NON_NEGATIVE_INTEGER, POSITIVE_INTEGER, Schema, setting, text

GAME = text("a game name")


@dataclass(frozen=True, kw_only=True)
class AtariSettings(Schema):
    """The paper's Atari preprocessing, for both Atari kinds (`envs.atari.make_env`,
    `envs.lean_atari.make_lean_env`)."""

    section: ClassVar[str] = "env"

    game: str = setting("pong", rule=GAME)  # an ale-py ROM id, display name or gymnasium id
    frame_skip: int = setting(
        4, rule=POSITIVE_INTEGER
    )  # action repeat, max over the last two frames
    screen_size: int = setting(84, rule=POSITIVE_INTEGER)
    noop_max: int = setting(30, rule=NON_NEGATIVE_INTEGER)  # 1..30 random no-ops at every reset
    max_episode_frames: int = setting(108_000, rule=NON_NEGATIVE_INTEGER)  # 30 minutes of play
    repeat_action_probability: float = setting(0.0, rule=FRACTION)  # no sticky actions
    full_action_space: bool = setting(False, rule=BOOLEAN)  # the minimal action set


@dataclass(frozen=True, kw_only=True)
class MinAtarSettings(Schema):
    """MinAtar through the minatar package (`envs.minatar.make_minatar_env`): the package's
    defaults, as its published agents ran."""

    section: ClassVar[str] = "env"

    # asterix | breakout | freeway | seaquest | space_invaders
    game: str = setting("breakout", rule=GAME)
    frame_skip: int = setting(1, rule=POSITIVE_INTEGER)  # one MinAtar frame per agent step
    repeat_action_probability: float = setting(0.1, rule=FRACTION)  # sticky actions
    difficulty_ramping: bool = setting(True, rule=BOOLEAN)
    max_episode_frames: int = setting(0, rule=NON_NEGATIVE_INTEGER)  # 0: no cap
