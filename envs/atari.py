"""Atari envs with the preprocessing of the DQN papers (Mnih et al. 2015, Schaul et al. 2016)."""

from __future__ import annotations

from typing import Any

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing

from envs.games import resolve_game
from envs.settings import AtariSettings

gym.register_envs(ale_py)


def make_env(game: str, seed: int, **settings: Any) -> gym.Env:
    """Build one Atari env with the paper's preprocessing.

    ``game``: any name :func:`envs.games.resolve_game` accepts; ``settings``: the other
    :class:`envs.settings.AtariSettings` (checked there, defaults if not given). It guarantees:

    * observations: one ``(screen_size, screen_size)`` uint8 grayscale frame (not stacked: see
      :class:`envs.frame_stack.FrameStack`), the pixel-wise max of the last two emulator frames of
      the skip, area-resized (gymnasium's ``AtariPreprocessing``, OpenCV ``INTER_AREA``);
    * one ``step`` repeats the action for ``frame_skip`` emulator frames; the reward is their
      unclipped game score (float). A step on which the game ends stops at that frame, and its
      observation may still be the previous step's (``AtariPreprocessing`` leaves the skip loop
      early); a terminal frame is never bootstrapped from;
    * ``reset`` plays a uniform number of no-ops in ``1..noop_max`` (inclusive; 0 disables),
      drawn from the env's seeded ``np_random``. Each no-op is ONE emulator frame, so after reset
      ``info["episode_frame_number"]`` equals the number of no-ops;
    * ``info`` on reset and on every step carries ``lives``, ``life_lost`` (True on the step where
      ``lives`` decreased; the game goes on, ``terminated`` stays False until the game is over --
      it is only meant for the bootstrap mask) and ``episode_frame_number`` (ALE's emulator frame
      count since the game was reset, no-op frames included; ``ale.restoreState`` restores it, so a
      restored human-start prefix counts towards the cap too);
    * the cap: the first step after which ``episode_frame_number >= max_episode_frames`` returns
      ``truncated=True`` (and ``terminated=False``, unless the game ended on that very step, which
      then is a termination only). That step is always complete, so the frame count at truncation
      is in ``[max_episode_frames, max_episode_frames + frame_skip - 1]`` and the observation is the
      true last frame, fit for bootstrapping. ALE's own ``max_num_frames_per_episode`` is switched
      off on purpose: it cuts the episode at exactly the cap, in the middle of a skip, and
      ``AtariPreprocessing`` then returns the previous step's frame. ``max_episode_frames=0``
      disables the cap;
    * no sticky actions (``repeat_action_probability`` 0.0 unless asked), the minimal action set
      (``env.action_space.n``: Pong 6, Breakout 4) unless ``full_action_space``, no FIRE on reset,
      no life-loss terminals;
    * ``seed`` seeds the first ``reset()`` (no-op counts and ALE) and ``env.action_space``: two
      envs made with the same seed and fed the same actions are identical. ``reset(seed=s)``
      re-seeds explicitly; later unseeded resets continue the seeded stream;
    * ``env.unwrapped.ale`` is the live ``ALEInterface`` (``cloneState``/``restoreState``).
    """
    return atari_env(AtariSettings(game=game, **settings), seed)


def atari_env(s: AtariSettings, seed: int) -> gym.Env:
    """`make_env` from the env section its schema read (`env.kind=atari`)."""
    spec = resolve_game(s.game)
    env = gym.make(
        spec.gym_id,
        # AtariPreprocessing reads the screen itself; grayscale avoids an RGB copy per frame.
        obs_type="grayscale",
        frameskip=1,
        repeat_action_probability=s.repeat_action_probability,
        full_action_space=s.full_action_space,
        max_num_frames_per_episode=0,  # 0 = no ALE cap; _EpisodeInfo enforces it (see above)
    )
    env = AtariPreprocessing(
        env,
        noop_max=s.noop_max,
        frame_skip=s.frame_skip,
        screen_size=s.screen_size,
        terminal_on_life_loss=False,
        grayscale_obs=True,
        scale_obs=False,
    )
    env = _EpisodeInfo(env, seed=seed, max_episode_frames=s.max_episode_frames)
    env.action_space.seed(seed)
    return env


class _EpisodeInfo(gym.Wrapper):
    """Adds ``lives``/``life_lost``/``episode_frame_number`` to info, applies the frame cap and
    the construction seed; the outermost layer, so it is what implements
    :class:`envs.interface.TrainingEnv` for Atari."""

    def __init__(self, env: gym.Env, *, seed: int, max_episode_frames: int):
        super().__init__(env)
        self._max_episode_frames = max_episode_frames
        self._pending_seed: int | None = seed
        self._lives = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        obs, info = self.env.reset(seed=seed, options=options)
        self._lives = self.unwrapped.ale.lives()
        return obs, self._annotate(info, life_lost=False)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.unwrapped.ale.lives()
        life_lost = lives < self._lives
        self._lives = lives
        info = self._annotate(info, life_lost=life_lost)
        at_cap = 0 < self._max_episode_frames <= info["episode_frame_number"]
        truncated = (truncated or at_cap) and not terminated
        return obs, float(reward), terminated, truncated, info

    def noops_after_life_loss(self) -> tuple[np.ndarray, bool, dict[str, Any]]:
        """Continue the game after a lost life as DeepMind's training code does (alewrap's
        ``nextRandomGame`` when the game is not over): one no-op frame, then k more with k
        uniform in ``1..noop_max`` from the env's no-op generator (k = 0 when no-ops are off),
        so 2..31 frames by default. The observation is the max over the last two of them,
        resized. Returns ``(observation, terminated, info)``: the game may end meanwhile."""
        preprocessing = _preprocessing(self.env)
        noop_max = preprocessing.noop_max
        extra = int(self.unwrapped.np_random.integers(1, noop_max + 1)) if noop_max > 0 else 0
        count, buffers = 1 + extra, preprocessing.obs_buffer
        buffers[1].fill(0)  # a single no-op frame has nothing to pool with
        terminated = False
        for index in range(count):
            _, _, terminated, _, _ = preprocessing.env.step(0)
            if terminated:
                break
            if index >= count - 2:
                self.unwrapped.ale.getScreenGrayscale(buffers[count - 1 - index])
        self._lives = self.unwrapped.ale.lives()
        preprocessing.game_over = terminated
        observation = preprocessing._get_obs()  # the wrapper's own max-pool and resize
        return observation, terminated, self._annotate({}, life_lost=False)

    def capture_state(self) -> dict[str, Any]:
        """Everything needed to continue exactly from this moment: the emulator (with its
        random generator), the no-op generator, the wrappers' counters and the max-pooling
        buffer (a step that ends the game mid-skip returns a max over the step before's
        frames). Plain data: bytes, ints, bools and a uint8 array."""
        preprocessing = _preprocessing(self.env)
        return {
            "obs_buffer": np.stack(preprocessing.obs_buffer),
            "ale": self.unwrapped.ale.cloneState(include_rng=True).serialize(),
            "np_random": self.unwrapped.np_random.bit_generator.state,
            "lives": self._lives,
            "pending_seed": self._pending_seed,
            "preprocessing_lives": preprocessing.lives,
            "preprocessing_game_over": preprocessing.game_over,
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        """Go back to a captured state (this env must have been reset once)."""
        self.unwrapped.ale.restoreState(ale_py.ALEState(state["ale"]))
        self.unwrapped.np_random.bit_generator.state = state["np_random"]
        self._lives = int(state["lives"])
        self._pending_seed = state["pending_seed"]
        preprocessing = _preprocessing(self.env)
        preprocessing.lives = int(state["preprocessing_lives"])
        preprocessing.game_over = bool(state["preprocessing_game_over"])
        for buffer, saved in zip(preprocessing.obs_buffer, state["obs_buffer"], strict=True):
            buffer[...] = saved

    def _annotate(self, info: dict[str, Any], *, life_lost: bool) -> dict[str, Any]:
        ale = self.unwrapped.ale
        info = dict(info)
        info.update(
            lives=self._lives,
            life_lost=life_lost,
            episode_frame_number=ale.getEpisodeFrameNumber(),
        )
        return info


def _preprocessing(env: gym.Env) -> AtariPreprocessing:
    layer = env
    while not isinstance(layer, AtariPreprocessing):
        layer = layer.env
    return layer
