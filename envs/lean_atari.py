"""An Atari env that drives ale-py directly, with the Nature paper's frame processing.

``make_lean_env`` keeps :func:`envs.atari.make_env`'s arguments and guarantees, but for:

* pooling order: the per-pixel max of the last two RGB frames, then luminance, then the resize
  (Mnih et al. 2015); ``make_env`` takes the max of grey frames. They differ where a pixel
  changes colour between the two frames (in Pong with random play, by up to 16 grey levels on
  0.2 % of the pixels for some no-op counts);
* luminance: OpenCV's ITU-R BT.601 ``RGB2GRAY``, which on the NTSC palette is ALE's own
  grayscale, so a frame with nothing to pool is exactly ``make_env``'s;
* a step that ends the game returns the game-over frame alone, so every observation depends
  on its own call's frames only and the captured state holds no frame buffer.

A seed gives ``make_env``'s emulator, no-op counts and rewards (seeded as gymnasium's).
"""

from __future__ import annotations

from typing import Any

import ale_py
import cv2
import numpy as np
from ale_py import roms
from gymnasium.spaces import Box, Discrete

from envs.games import resolve_game
from envs.settings import AtariSettings

NOOP = ale_py.Action.NOOP


def make_lean_env(game: str, seed: int, **settings) -> LeanAtariEnv:
    return LeanAtariEnv(AtariSettings(game=game, **settings), seed)


class LeanAtariEnv:
    """One game on a bare ``ALEInterface`` (``self.ale``), from the env section its schema read
    (`env.kind=lean_atari`)."""

    def __init__(self, s: AtariSettings, seed: int):
        self.ale = ale_py.ALEInterface()
        self.ale.setLoggerMode(ale_py.LoggerMode.Error)
        self.ale.setFloat("repeat_action_probability", s.repeat_action_probability)
        self.ale.setInt("frame_skip", 1)
        # 0 = no ALE cap: ALE would cut the episode in the middle of a skip; step() applies it.
        self.ale.setInt("max_num_frames_per_episode", 0)
        self._rom = roms.get_rom_path(resolve_game(s.game).rom_id)
        self._seed(seed)
        action_set = (
            self.ale.getLegalActionSet() if s.full_action_space else self.ale.getMinimalActionSet()
        )
        self._actions = list(action_set)
        self.action_space = Discrete(len(self._actions), seed=seed)
        self._size = (s.screen_size, s.screen_size)
        self.observation_space = Box(0, 255, self._size, np.uint8)
        self._frame_skip, self._noop_max = s.frame_skip, s.noop_max
        self._max_episode_frames = s.max_episode_frames
        height, width = self.ale.getScreenDims()
        # The last two frames' RGB screens, written in place: no allocation per emulator frame.
        self._screens = np.zeros((2, height, width, 3), dtype=np.uint8)
        self._grey = np.zeros((height, width), dtype=np.uint8)
        self._lives = 0

    @property
    def unwrapped(self) -> LeanAtariEnv:
        """Itself: code written for gymnasium envs reaches the emulator as ``env.unwrapped.ale``."""
        return self

    def reset(self, *, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """A new game after 1..noop_max no-op frames, the last observed alone."""
        if seed is not None:
            self._seed(seed)
        self.ale.reset_game()
        noops = self._draw_noops()
        for _ in range(noops):
            self.ale.act(NOOP)
            if self.ale.game_over(with_truncation=False):
                self.ale.reset_game()  # as gymnasium's no-op reset does; no game ends this soon
        self._lives = self.ale.lives()
        self.ale.getScreenRGB(self._screens[0])
        return self._observe(pooled=False), self._info(life_lost=False)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated = self._play(self._actions[action], self._frame_skip)
        lives = self.ale.lives()
        life_lost = lives < self._lives
        self._lives = lives
        info = self._info(life_lost=life_lost)
        at_cap = 0 < self._max_episode_frames <= info["episode_frame_number"]
        return observation, reward, terminated, at_cap and not terminated, info

    def noops_after_life_loss(self) -> tuple[np.ndarray, bool, dict[str, Any]]:
        """``make_env``'s rule after a lost life."""
        count = 1 + self._draw_noops()
        observation, _, terminated = self._play(NOOP, count)
        self._lives = self.ale.lives()
        return observation, terminated, self._info(life_lost=False)

    def capture_state(self) -> dict[str, Any]:
        """Plain data to continue exactly from here; exact without sticky actions only, as ALE's
        state leaves out the last action a sticky repeat replays (as for ``make_env``)."""
        return {
            "ale": self.ale.cloneState(include_rng=True).serialize(),
            "np_random": self.np_random.bit_generator.state,
            "lives": self._lives,
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        self.ale.restoreState(ale_py.ALEState(state["ale"]))
        self.np_random.bit_generator.state = state["np_random"]
        self._lives = int(state["lives"])

    def close(self) -> None:
        """Nothing to release: the emulator has no window or file, it goes with the object."""

    def _seed(self, seed: int) -> None:
        """gymnasium's ``AtariEnv.seed_game`` + ``load_game``: ALE takes its seed on loading."""
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        self.np_random = np.random.default_rng(int(np_seed))
        self.ale.setInt("random_seed", int(ale_seed.astype(np.int32)))
        self.ale.loadROM(self._rom)

    def _draw_noops(self) -> int:
        return int(self.np_random.integers(1, self._noop_max + 1)) if self._noop_max > 0 else 0

    def _play(self, action: ale_py.Action, frames: int) -> tuple[np.ndarray, float, bool]:
        """(max of the last two of ``frames`` frames, score, game over); a game over alone."""
        reward, last = 0.0, frames - 1
        for index in range(frames):
            reward += self.ale.act(action)
            if self.ale.game_over(with_truncation=False):
                self.ale.getScreenRGB(self._screens[0])
                return self._observe(pooled=False), reward, True
            if index >= last - 1:  # the last frame to slot 0, where a lone frame is read
                self.ale.getScreenRGB(self._screens[last - index])
        return self._observe(pooled=frames > 1), reward, False

    def _observe(self, *, pooled: bool) -> np.ndarray:
        """Slot 0 (max-pooled with slot 1 if ``pooled``), to luminance, area-resized."""
        screen = self._screens[0]
        if pooled:
            np.maximum(screen, self._screens[1], out=screen)
        cv2.cvtColor(screen, cv2.COLOR_RGB2GRAY, dst=self._grey)
        return cv2.resize(self._grey, self._size, interpolation=cv2.INTER_AREA)

    def _info(self, *, life_lost: bool) -> dict[str, Any]:
        return {
            "lives": self._lives,
            "life_lost": life_lost,
            "episode_frame_number": self.ale.getEpisodeFrameNumber(),
        }
