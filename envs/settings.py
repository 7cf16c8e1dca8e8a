"""The environments' settings (the config's `env` section, whose `kind` chooses the environment
and so the schema: `envs.registry`). The game is any name the kind resolves to its id
(`EnvironmentKind.game_id`), whose refusal of the others names the closest games."""

from dataclasses import dataclass
from typing import Any, ClassVar

from schema import (
    BOOLEAN,
    FRACTION,
    NON_NEGATIVE_INTEGER,
    POSITIVE_INTEGER,
    Rule,
    Settings,
    one_of,
    setting,
)

ENVIRONMENTS: dict[str, Any] = {}
KIND = one_of(ENVIRONMENTS, "envs.registry")


def game_of(kind: str) -> Rule:
    return Rule("a game name", lambda name: ENVIRONMENTS[kind].game_id(name))


@dataclass(frozen=True, kw_only=True)
class AtariSettings(Settings):
    """The paper's Atari preprocessing, for both Atari kinds (`envs.registry`)."""

    section: ClassVar[str] = "env"

    kind: str = setting("atari", KIND, "identity")  # atari | lean_atari
    # an ale-py ROM id, display name or gymnasium id
    game: str = setting("pong", game_of("atari"), "identity", "hyperparameter")
    frame_skip: int = setting(4, POSITIVE_INTEGER)  # action repeat, max over the last two frames
    screen_size: int = setting(84, POSITIVE_INTEGER, "identity")
    noop_max: int = setting(30, NON_NEGATIVE_INTEGER)  # 1..30 random no-ops at every reset
    max_episode_frames: int = setting(108_000, NON_NEGATIVE_INTEGER)  # 30 minutes of play
    repeat_action_probability: float = setting(0.0, FRACTION)  # no sticky actions
    full_action_space: bool = setting(False, BOOLEAN, "identity")  # the minimal action set


@dataclass(frozen=True, kw_only=True)
class MinAtarSettings(Settings):
    """MinAtar through the minatar package, with its defaults, as its published agents ran."""

    section: ClassVar[str] = "env"

    kind: str = setting("minatar", KIND, "identity")
    # asterix | breakout | freeway | seaquest | space_invaders
    game: str = setting("breakout", game_of("minatar"), "identity", "hyperparameter")
    frame_skip: int = setting(1, POSITIVE_INTEGER)  # one MinAtar frame per agent step
    repeat_action_probability: float = setting(0.1, FRACTION)  # sticky actions
    difficulty_ramping: bool = setting(True, BOOLEAN)
    max_episode_frames: int = setting(0, NON_NEGATIVE_INTEGER)  # 0: no cap
