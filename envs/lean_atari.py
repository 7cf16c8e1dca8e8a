"""An Atari env that drives ale-py directly, with the Nature paper's frame processing.

``make_lean_env`` takes :func:`envs.atari.make_env`'s arguments and keeps its guarantees (no-ops,
frame cap, ``life_lost``, ``noops_after_life_loss``, capture/restore, seeding), with these
differences:

* pooling order: the per-pixel maximum of the last two RGB frames, then luminance, then the area
  resize (Mnih et al. 2015); ``make_env`` converts each frame to grey before the maximum. The two
  differ where a pixel changes colour between the two frames, by up to 16 grey levels after the
  resize: in Pong with random play, on 0.2 % of the pixels when the no-op count is even (seeds
  0 and 7 of 0-9), never in 200 steps when it is odd (the 8 others);
* luminance: ITU-R BT.601, Y = 0.299 R + 0.587 G + 0.114 B, as OpenCV's ``cvtColor(RGB2GRAY)``
  computes it: ``(9798 R + 19235 G + 3735 B + 2**14) >> 15``, i.e. rounded to the nearest grey
  level in 15-bit fixed point. On the 128 NTSC palette colours this equals ALE's own grayscale,
  so a frame with nothing to pool is exactly ``make_env``'s;
* a step that ends the game returns the game-over frame alone (``make_env`` may return a stale
  max from the step before). So every observation depends on the frames of its own call only,
  and the captured state holds no frame buffer;
* the seed: ``seed`` (or ``reset(seed=s)``) seeds ALE and the no-op generator exactly as
  gymnasium's ``AtariEnv`` does, so one seed gives ``make_env``'s emulator, no-op counts and
  rewards; only the observations differ, by the pooling order.
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
    """Build one Atari env: :func:`envs.atari.make_env`'s arguments and guarantees, with the
    paper's pooling order (module docstring). Implements :class:`envs.interface.TrainingEnv`."""
    return lean_atari_env(AtariSettings(game=game, **settings), seed)


def lean_atari_env(s: AtariSettings, seed: int) -> LeanAtariEnv:
    """`make_lean_env` from the env section its schema read (`env.kind=lean_atari`)."""
    return LeanAtariEnv(
        resolve_game(s.game).rom_id,
        seed,
        frame_skip=s.frame_skip,
        screen_size=s.screen_size,
        noop_max=s.noop_max,
        max_episode_frames=s.max_episode_frames,
        repeat_action_probability=s.repeat_action_probability,
        full_action_space=s.full_action_space,
    )


class LeanAtariEnv:
    """One game on a bare ``ALEInterface`` (``self.ale``). Build it with :func:`make_lean_env`."""

    def __init__(
        self,
        rom_id: str,
        seed: int,
        *,
        frame_skip: int,
        screen_size: int,
        noop_max: int,
        max_episode_frames: int,
        repeat_action_probability: float,
        full_action_space: bool,
    ):
        self.ale = ale_py.ALEInterface()
        self.ale.setLoggerMode(ale_py.LoggerMode.Error)
        self.ale.setFloat("repeat_action_probability", repeat_action_probability)
        self.ale.setInt("frame_skip", 1)
        # 0 = no ALE cap: ALE would cut the episode in the middle of a skip; step() applies it.
        self.ale.setInt("max_num_frames_per_episode", 0)
        self._rom = roms.get_rom_path(rom_id)
        self._seed(seed)
        action_set = (
            self.ale.getLegalActionSet() if full_action_space else self.ale.getMinimalActionSet()
        )
        self._actions = list(action_set)
        self.action_space = Discrete(len(self._actions), seed=seed)
        self.observation_space = Box(0, 255, (screen_size, screen_size), np.uint8)
        self._frame_skip, self._noop_max = frame_skip, noop_max
        self._max_episode_frames = max_episode_frames
        self._size = (screen_size, screen_size)
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
        """A new game after 1..noop_max no-op frames (0 disables them); the observation is the
        last no-op frame (the reset screen without no-ops) alone: it has no partner to pool
        with. ``seed`` re-seeds as gymnasium does (ALE, its ROM reload, the no-op generator);
        without it, the generator's stream goes on."""
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
        """``action`` for ``frame_skip`` frames, stopping at game over; the unclipped score;
        truncated on the first step that reaches the frame cap (make_env's rule)."""
        observation, reward, terminated = self._play(self._actions[action], self._frame_skip)
        lives = self.ale.lives()
        life_lost = lives < self._lives
        self._lives = lives
        info = self._info(life_lost=life_lost)
        at_cap = 0 < self._max_episode_frames <= info["episode_frame_number"]
        return observation, reward, terminated, at_cap and not terminated, info

    def noops_after_life_loss(self) -> tuple[np.ndarray, bool, dict[str, Any]]:
        """DeepMind's training rule after a lost life (``make_env``'s): one no-op frame, then k
        more with k uniform in 1..noop_max from the no-op generator (k = 0 without no-ops); the
        observation pools the last two. Returns ``(observation, terminated, info)``."""
        count = 1 + self._draw_noops()
        observation, _, terminated = self._play(NOOP, count)
        self._lives = self.ale.lives()
        return observation, terminated, self._info(life_lost=False)

    def capture_state(self) -> dict[str, Any]:
        """Plain data (bytes, a dict of ints, an int) to continue exactly from this moment:
        the emulator with its random generator, the no-op generator, the lives seen last. No
        frame buffer: every call fills the ones it reads before reading them. Exact without
        sticky actions only: ALE's state leaves out the last action that a sticky repeat
        replays (as for ``make_env``)."""
        return {
            "ale": self.ale.cloneState(include_rng=True).serialize(),
            "np_random": self.np_random.bit_generator.state,
            "lives": self._lives,
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        """Go back to a captured state."""
        self.ale.restoreState(ale_py.ALEState(state["ale"]))
        self.np_random.bit_generator.state = state["np_random"]
        self._lives = int(state["lives"])

    def close(self) -> None:
        """Nothing to release: the emulator has no window or file, it goes with the object."""

    def _seed(self, seed: int) -> None:
        """gymnasium's ``AtariEnv.seed_game`` + ``load_game``: one seed sequence gives the no-op
        generator's seed and ALE's; ALE takes its seed when the ROM is loaded."""
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        self.np_random = np.random.default_rng(int(np_seed))
        self.ale.setInt("random_seed", int(ale_seed.astype(np.int32)))
        self.ale.loadROM(self._rom)

    def _draw_noops(self) -> int:
        return int(self.np_random.integers(1, self._noop_max + 1)) if self._noop_max > 0 else 0

    def _play(self, action: ale_py.Action, frames: int) -> tuple[np.ndarray, float, bool]:
        """Play up to ``frames`` frames and observe the max of the last two (one frame: alone).
        A game over stops the frames there, and its frame is observed alone: the frame before
        it was not grabbed. Returns (observation, score, game over)."""
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
