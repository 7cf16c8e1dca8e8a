"""The environments by name: `env.kind` in the config. A new environment is one module with a
factory like `envs.atari.make_env` (returning a `TrainingEnv`), one `EnvironmentKind` here and
one `configs/env/<kind>.yaml` whose keys are the factory's arguments."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envs.atari import make_env
from envs.games import resolve_game
from envs.interface import TrainingEnv
from envs.lean_atari import make_lean_env
from envs.minatar import make_minatar_env, minatar_frame_shape, resolve_minatar_game


@dataclass(frozen=True)
class EnvironmentKind:
    """What the application needs to know of an environment before building it.

    `make(seed=..., **settings)` builds it; `game_id(name)` is the canonical name of a game
    (what run configs store), or a one-line ValueError naming `env.game`; `frame_shape(settings)`
    is the shape of one frame; `family` names the games (Atari kinds share human reference
    scores, human starts and result folders; `has_human_reference` says whether they exist).
    """

    make: Callable[..., TrainingEnv]
    game_id: Callable[[str], str]
    frame_shape: Callable[[Mapping], tuple[int, ...]]
    family: str
    has_human_reference: bool


def _atari_game_id(name: str) -> str:
    return resolve_game(name).rom_id


def _atari_frame_shape(settings: Mapping) -> tuple[int, int]:
    return (settings["screen_size"],) * 2


_ATARI = {"game_id": _atari_game_id, "frame_shape": _atari_frame_shape, "family": "atari"}
ENVIRONMENTS: dict[str, EnvironmentKind] = {
    "atari": EnvironmentKind(make_env, **_ATARI, has_human_reference=True),
    "lean_atari": EnvironmentKind(make_lean_env, **_ATARI, has_human_reference=True),
    "minatar": EnvironmentKind(
        make_minatar_env,
        game_id=resolve_minatar_game,
        frame_shape=lambda settings: minatar_frame_shape(settings["game"]),
        family="minatar",
        has_human_reference=False,
    ),
}
DEFAULT_KIND = "atari"  # what a run config without `env.kind` (older runs) was trained on


def environment_kind(kind: str | None) -> EnvironmentKind:
    """The kind named `kind` (None: atari, for runs from before `env.kind`), or a one-line
    ValueError naming `env.kind`."""
    kind = DEFAULT_KIND if kind is None else kind
    if kind not in ENVIRONMENTS:
        raise ValueError(
            f"env.kind={kind} is not allowed: must be one of {', '.join(ENVIRONMENTS)}"
        )
    return ENVIRONMENTS[kind]


def build_env(settings: Mapping, seed: int) -> TrainingEnv:
    """The env `settings["kind"]` (default: atari), given the other settings as arguments."""
    arguments = dict(settings)
    arguments.pop("kind", None)
    return environment_kind(settings.get("kind")).make(seed=seed, **arguments)
