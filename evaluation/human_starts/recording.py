"""Trajectory files from play: a human at the keyboard (gymnasium's ``play``), or an agent
playing ε-greedily through its env as in an evaluation. An agent's log holds a NOOP frame per
no-op of the reset and each action once per emulator frame it was held (fewer than the frame
skip on the step where the game ends), so that ``replay_env`` replays the game exactly.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import closing
from typing import TYPE_CHECKING

import numpy as np

from envs.frame_stack import FrameStack
from envs.games import resolve_game
from envs.registry import build_env, env_settings
from envs.settings import AtariSettings
from evaluation.human_starts.trajectories import Trajectory, TrajectoryLog, replay_env

if TYPE_CHECKING:
    from agents.policy import EpsilonGreedy


class KeyboardRecorder:
    """gymnasium ``play``'s per-frame callback: one trajectory of ALE action ids per game."""

    def __init__(self, legal_actions, *, seed: int, max_frames: int | None, source: str):
        self._legal_actions = [a.value for a in legal_actions]  # ale_py.Action -> id
        self.seed, self.max_frames, self.source = seed, max_frames, source
        self.trajectories: list[Trajectory] = []
        self.frames = 0
        self.pressed = False  # whether any frame had an action other than NOOP (index 0)
        self._actions: list[int] = []
        self._score = 0.0

    def __call__(self, _observation, _next_observation, action, reward, terminated, truncated, _):
        self._actions.append(self._legal_actions[int(action)])
        self.pressed = self.pressed or int(action) != 0
        self._score += float(reward)
        self.frames += 1
        if terminated or truncated:
            self.finish()
        if self.max_frames and self.frames >= self.max_frames:
            import pygame  # play() is running, so pygame is installed and initialised

            pygame.event.post(pygame.event.Event(pygame.QUIT))

    def finish(self) -> None:
        """Close the current game; a game cut short by the end of the session is kept too."""
        if self._actions:
            source = f"{self.source} game {len(self.trajectories)}".strip()
            self.trajectories.append(
                Trajectory(tuple(self._actions), self.seed, self._score, source)
            )
        self._actions, self._score = [], 0.0


# SDL's video drivers that show nothing: a session on them has no one to play it.
HEADLESS_DRIVERS = ("dummy", "offscreen")


def display_problem(environ=os.environ, platform: str = sys.platform) -> str | None:
    """Why keyboard play cannot be shown to a human here, or None: on Linux it needs an X11 or
    Wayland display, and no SDL_VIDEODRIVER that draws nowhere."""
    driver = environ.get("SDL_VIDEODRIVER", "")
    if driver in HEADLESS_DRIVERS:
        return f"SDL_VIDEODRIVER={driver} shows nothing"
    if platform.startswith("linux") and not (
        environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")
    ):
        return "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    return None


def record_trajectories(
    game: str,
    *,
    seed: int,
    max_frames: int | None,
    fps: int,
    zoom: float,
    source: str = "keyboard",
    on_frame=None,
) -> TrajectoryLog:
    """The games a human plays at the keyboard, each from ``reset(seed=seed)``, until Esc, the
    window's close or ``max_frames`` frames; ``on_frame`` hears the frame count after each
    frame. A one-line ValueError for a session in which no key was pressed (no human played),
    or that SIGTERM or SIGINT stopped (SDL would make it an ordinary end of the session)."""
    try:
        from gymnasium.utils.play import play
    except ImportError:
        raise ValueError(
            "keyboard recording needs pygame: pip install '.[play]' in the checkout "
            "(or pip install pygame)"
        ) from None
    env = replay_env(game)
    recorder = KeyboardRecorder(
        env.unwrapped.ale.getLegalActionSet(), seed=seed, max_frames=max_frames, source=source
    )

    def callback(*transition):
        recorder(*transition)
        if on_frame is not None:
            on_frame(recorder.frames)

    stopped: list[int] = []

    def end_session(signum: int, _frame) -> None:
        """Remember the signal and end the pygame session, if one is running."""
        stopped.append(signum)
        pygame = sys.modules.get("pygame")
        if pygame is not None and pygame.display.get_init():
            pygame.event.post(pygame.event.Event(pygame.QUIT))

    # Installed first: SDL then leaves these signals alone.
    previous = {s: signal.signal(s, end_session) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        play(env, fps=fps, zoom=zoom, callback=callback, seed=seed, noop=0)
    finally:
        env.close()
        for number, handler in previous.items():
            signal.signal(number, handler)
    recorder.finish()
    if stopped:
        name = signal.Signals(stopped[0]).name
        raise ValueError(f"stopped by {name}: the session ({recorder.frames} frames) is not saved")
    if not recorder.trajectories:
        raise ValueError("no frame was played: nothing to record")
    if not recorder.pressed:
        raise ValueError(
            f"no key was pressed in {recorder.frames} frames: nothing to record (start points "
            "come from a human playing)"
        )
    return TrajectoryLog(resolve_game(game).rom_id, tuple(recorder.trajectories), 1)


def play_trajectories(
    agent: EpsilonGreedy,
    env_kwargs: dict,
    *,
    reset_seeds: list[int],
    epsilon: float,
    rng: np.random.Generator,
    source: str = "agent",
) -> TrajectoryLog:
    """One game per reset seed, ``agent`` acting ε-greedily until game over or the frame cap,
    as a log whose replay is exactly these games. ValueError for sticky actions (a repeat would
    replace a logged action) or an agent whose actions do not fit the env."""
    sticky = env_kwargs.get("repeat_action_probability", AtariSettings.repeat_action_probability)
    if sticky:
        raise ValueError(
            f"env.repeat_action_probability={sticky}: a game with sticky actions cannot be "
            "logged exactly; set env.repeat_action_probability=0.0"
        )
    # Seed 0: every reset below is seeded explicitly.
    settings = env_settings(env_kwargs)
    with closing(build_env(settings, seed=0)) as env:
        if env.action_space.n != agent.num_actions:
            raise ValueError(
                f"the agent has {agent.num_actions} actions, the env {env.action_space.n} "
                "(env.full_action_space differs from training?)"
            )
        stack = FrameStack(agent.history_length, env.observation_space.shape)
        # The agent's action index -> ALE id: the env's table, as both Atari kinds build it.
        ale = env.unwrapped.ale
        table = ale.getLegalActionSet() if settings.full_action_space else ale.getMinimalActionSet()
        ale_ids = [action.value for action in table]
        games = tuple(
            _play_game(env, ale_ids, agent, stack, seed, epsilon, rng, f"{source} game {i}")
            for i, seed in enumerate(reset_seeds)
        )
    return TrajectoryLog(resolve_game(env_kwargs["game"]).rom_id, games, 1)


def _play_game(env, ale_ids, agent: EpsilonGreedy, stack, seed: int, epsilon, rng, source: str):
    frame, info = env.reset(seed=seed)
    actions = [0] * info["episode_frame_number"]  # make_env's no-ops: one NOOP frame each
    state, score = stack.reset(frame), 0.0
    while True:
        index = agent.act(state, epsilon, rng=rng)
        frame, reward, terminated, truncated, info = env.step(index)
        actions += [ale_ids[index]] * (info["episode_frame_number"] - len(actions))
        score += reward
        if terminated or truncated:
            return Trajectory(tuple(actions), seed, score, source)
        state = stack.push(frame)
