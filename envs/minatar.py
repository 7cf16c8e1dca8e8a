"""MinAtar (Young & Tian 2019): five miniature Atari games on a 10×10 grid, through the `minatar`
package's own `Environment` (sticky actions and difficulty ramping are its features)."""

from __future__ import annotations

import copy
import importlib
from types import SimpleNamespace
from typing import Any

import numpy as np

from envs.settings import MinAtarSettings

GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
NUM_ACTIONS = 6  # the full action set, as the published agents use
GRID_SIZE = 10


def resolve_minatar_game(game: str) -> str:
    """The package's name of a MinAtar game (also `SpaceInvaders`, `MinAtar/SpaceInvaders-v0`)."""
    key = str(game).removeprefix("MinAtar/").split("-v")[0].replace("_", "").lower()
    for name in GAMES:
        if name.replace("_", "") == key:
            return name
    raise ValueError(f"env.game={game} is not allowed: MinAtar's games are {', '.join(GAMES)}")


def minatar_frame_shape(game: str) -> tuple[int, int, int]:
    """(channels, 10, 10): the game's object channels (4 to 10) on the grid."""
    module = importlib.import_module(f"minatar.environments.{resolve_minatar_game(game)}")
    return (module.Env().state_shape()[2], GRID_SIZE, GRID_SIZE)


def make_minatar_env(game: str, seed: int, **settings) -> MinAtarEnv:
    return MinAtarEnv(MinAtarSettings(game=game, **settings), seed)


class MinAtarEnv:
    """A MinAtar game as a `envs.registry.TrainingEnv`. Guarantees:

    * observations: one uint8 0/1 frame of shape (C, 10, 10), channel first, unstacked;
    * `frame_skip` package steps per `step`, their rewards summed, unclipped; all
      `NUM_ACTIONS` actions, sticky with probability `repeat_action_probability`;
    * `seed` seeds the package's one generator (game and sticky draws) at the first `reset`,
      so the same seed and actions give the same game; later resets go on with its stream;
    * no lives (`life_lost` always False); `episode_frame_number` counts package steps since
      the reset; `max_episode_frames` > 0 truncates at the step that reaches it.
    """

    def __init__(self, s: MinAtarSettings, seed: int):
        from minatar import Environment  # imports matplotlib and seaborn: only when used

        self.game = resolve_minatar_game(s.game)
        self._env = Environment(
            self.game,
            sticky_action_prob=s.repeat_action_probability,
            difficulty_ramping=s.difficulty_ramping,
        )
        self._frame_skip, self._max_episode_frames = s.frame_skip, s.max_episode_frames
        self._pending_seed: int | None = seed
        self._episode_frames = 0
        shape = minatar_frame_shape(self.game)
        self.observation_space = SimpleNamespace(shape=shape, dtype=np.uint8)
        self.action_space = SimpleNamespace(n=NUM_ACTIONS)

    def reset(self, *, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        seed = self._pending_seed if seed is None else seed
        self._pending_seed = None
        if seed is not None:
            self._env.seed(seed)
        self._env.reset()
        self._episode_frames = 0
        return self._frame(), self._info()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward, terminated = 0.0, False
        for _ in range(self._frame_skip):
            frame_reward, terminated = self._env.act(int(action))
            reward += float(frame_reward)
            self._episode_frames += 1
            if terminated:
                break
        cap = self._max_episode_frames
        truncated = not terminated and 0 < cap <= self._episode_frames
        return self._frame(), reward, bool(terminated), truncated, self._info()

    def noops_after_life_loss(self) -> tuple[np.ndarray, bool, dict[str, Any]]:
        raise RuntimeError("MinAtar games have no lives: no step reports a lost life")

    # The game object's attributes that are constants set at construction, not state.
    _CONSTANTS = ("random", "channels", "action_map")

    def capture_state(self) -> dict[str, Any]:
        """Plain data for a checkpoint, with the last action (what a sticky step repeats)."""
        game = self._env.env
        variables = {k: v for k, v in vars(game).items() if k not in self._CONSTANTS}
        name, keys, position, has_gauss, cached = self._env.random.get_state()
        return {
            "game": copy.deepcopy(variables),
            "random": {
                "keys": keys,
                "position": int(position),
                "has_gauss": int(has_gauss),
                "cached_gaussian": float(cached),
            },
            "last_action": int(self._env.last_action),
            "episode_frames": self._episode_frames,
            "pending_seed": self._pending_seed,
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        game = self._env.env
        for name, value in copy.deepcopy(state["game"]).items():
            setattr(game, name, value)
        random = state["random"]
        generator = np.random.RandomState()
        generator.set_state(
            ("MT19937", np.asarray(random["keys"], dtype=np.uint32), random["position"],
             random["has_gauss"], random["cached_gaussian"])
        )  # fmt: skip
        # The package shares one generator between its sticky draws and the game.
        self._env.random = game.random = generator
        self._env.last_action = int(state["last_action"])
        self._episode_frames = int(state["episode_frames"])
        self._pending_seed = state["pending_seed"]

    def close(self) -> None:
        """Nothing to release (the package holds no native resources)."""

    def _frame(self) -> np.ndarray:
        return np.ascontiguousarray(self._env.state().transpose(2, 0, 1), dtype=np.uint8)

    def _info(self) -> dict[str, Any]:
        return {"life_lost": False, "episode_frame_number": self._episode_frames}
