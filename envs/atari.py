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
    """One Atari env with the paper's preprocessing (``settings``: the others of
    `envs.settings.AtariSettings`). It guarantees:

    * observations: one uint8 grayscale frame, the max of the skip's last two emulator frames,
      area-resized; a step on which the game ends stops there, and its observation may be the
      previous step's (a terminal frame is never bootstrapped from);
    * a step repeats the action ``frame_skip`` frames; the reward is their unclipped score;
    * ``reset`` plays 1..``noop_max`` one-frame no-ops from the env's seeded ``np_random``;
    * ``info`` carries ``lives``, ``life_lost`` (the game goes on: for the bootstrap mask only)
      and ``episode_frame_number`` (ALE's, no-ops and a restored prefix included);
    * the first step that reaches ``max_episode_frames`` (0: no cap) is truncated, unless the
      game ended on it, and is whole: its observation is the true last frame. ALE's own cap is
      off, as it would cut the episode mid-skip and leave the previous step's frame;
    * no sticky actions unless asked, the minimal action set unless ``full_action_space``, no
      FIRE on reset, no life-loss terminals;
    * ``seed`` seeds the first ``reset()`` and the action space: the same seed and actions give
      the same game; later unseeded resets continue the stream;
    * ``env.unwrapped.ale`` is the live ``ALEInterface``.
    """
    return atari_env(AtariSettings(game=game, **settings), seed)


def atari_env(s: AtariSettings, seed: int) -> gym.Env:
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
    """The outermost layer, what implements `envs.registry.TrainingEnv` for Atari."""

    def __init__(self, env: AtariPreprocessing, *, seed: int, max_episode_frames: int):
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
        """Continue after a lost life as DeepMind's training code (alewrap's ``nextRandomGame``):
        one no-op frame, then 1..noop_max more, the observation pooling the last two. Returns
        ``(observation, terminated, info)``: the game may end meanwhile."""
        preprocessing = self.env
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
        """Plain data to continue exactly from here, the max-pooling buffer included (a step that
        ends the game mid-skip returns a max over the step before's frames)."""
        preprocessing = self.env
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
        """Go back to a captured state (of an env reset once)."""
        self.unwrapped.ale.restoreState(ale_py.ALEState(state["ale"]))
        self.unwrapped.np_random.bit_generator.state = state["np_random"]
        self._lives = int(state["lives"])
        self._pending_seed = state["pending_seed"]
        preprocessing = self.env
        preprocessing.lives = int(state["preprocessing_lives"])
        preprocessing.game_over = bool(state["preprocessing_game_over"])
        for buffer, saved in zip(preprocessing.obs_buffer, state["obs_buffer"], strict=True):
            buffer[...] = saved

    def _annotate(self, info: dict[str, Any], *, life_lost: bool) -> dict[str, Any]:
        frame_number = self.unwrapped.ale.getEpisodeFrameNumber()
        return {
            **info,
            "lives": self._lives,
            "life_lost": life_lost,
            "episode_frame_number": frame_number,
        }
