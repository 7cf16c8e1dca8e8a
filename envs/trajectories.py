"""Human play as action logs, and start points sampled from them by replay in the emulator.

A trajectory file is JSON (never a pickle)::

    {"format": "per-atari-trajectories", "version": 1, "game": "pong",
     "frames_per_action": 1,
     "trajectories": [{"seed": 0, "actions": [0, 0, 3, ...], "score": -3.0, "source": "..."}]}

``actions`` are ALE action ids (0..17, ``ale_py.Action``; the full action set, whatever set the
agent uses), each held for ``frames_per_action`` emulator frames (1 for keyboard play at 60 Hz).
A trajectory is replayed from ``reset(seed=seed)`` with sticky actions off, so it is exactly the
recorded game; ``score`` (optional) is checked against the replay. ``source`` says where it came
from. ``rom_md5`` and ``ale_py_version`` may be given and are then checked.

Sampling (the paper's human starts, after Nair et al. 2015 and van Hasselt et al. 2016: start
points "randomly sampled from human play"): every emulator frame k of every trajectory with
``0 <= k < min(trajectory length, max_episode_frames)`` is a candidate (k frames after reset),
and ``count`` distinct candidates are drawn uniformly over all of them, so a longer trajectory
gives proportionally more starts.

Command line (record with the keyboard, sample, show): ``python -m evaluation.start_states``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import ale_py
import cv2
import gymnasium as gym
import numpy as np

from envs.games import resolve_game
from envs.start_states import StartStates, rom_md5

gym.register_envs(ale_py)

FORMAT = "per-atari-trajectories"
VERSION = 1
NUM_ALE_ACTIONS = 18


@dataclass(frozen=True)
class Trajectory:
    """One game from reset: ALE action ids, the reset seed, its score (if known), its origin."""

    actions: tuple[int, ...]
    seed: int = 0
    score: float | None = None
    source: str = ""


@dataclass(frozen=True)
class TrajectoryLog:
    game: str  # ROM id
    trajectories: tuple[Trajectory, ...]
    frames_per_action: int = 1


def save_trajectories(path: str | os.PathLike, log: TrajectoryLog) -> None:
    document = {
        "format": FORMAT,
        "version": VERSION,
        "game": resolve_game(log.game).rom_id,
        "rom_md5": rom_md5(log.game),
        "ale_py_version": ale_py.__version__,
        "frames_per_action": log.frames_per_action,
        "trajectories": [
            {"seed": t.seed, "score": t.score, "source": t.source, "actions": list(t.actions)}
            for t in log.trajectories
        ],
    }
    Path(path).write_text(json.dumps(document, separators=(",", ":")) + "\n", "utf-8")


def load_trajectories(path: str | os.PathLike) -> TrajectoryLog:
    """Read and check a trajectory file; one-line ValueError naming the file and the key."""
    path = Path(path)
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"trajectory file {path} is unreadable or not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path} is not a trajectory file (format must be {FORMAT!r})")

    def fail(key: str, allowed: str):
        raise ValueError(f"trajectory file {path}: {key} must be {allowed}")

    if document.get("version") != VERSION:
        fail("version", str(VERSION))
    try:
        game = resolve_game(str(document.get("game"))).rom_id
    except ValueError:
        fail("game", "a known Atari game")
    if document.get("rom_md5", rom_md5(game)) != rom_md5(game):
        fail("rom_md5", f"the installed ROM's {rom_md5(game)} (another ROM replays differently)")
    if document.get("ale_py_version", ale_py.__version__) != ale_py.__version__:
        fail("ale_py_version", f"the installed {ale_py.__version__}")
    frames_per_action = document.get("frames_per_action", 1)
    if type(frames_per_action) is not int or frames_per_action < 1:
        fail("frames_per_action", "a positive integer")
    entries = document.get("trajectories")
    if not isinstance(entries, list) or not entries:
        fail("trajectories", "a non-empty list")
    trajectories = tuple(_parse_entry(path, i, entry) for i, entry in enumerate(entries))
    return TrajectoryLog(game, trajectories, frames_per_action)


def _parse_entry(path: Path, index: int, entry) -> Trajectory:
    key = f"trajectory file {path}: trajectories[{index}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{key} must be an object with actions, seed, score, source")
    actions, seed, score = entry.get("actions"), entry.get("seed", 0), entry.get("score")
    if not isinstance(actions, list) or not all(
        type(a) is int and 0 <= a < NUM_ALE_ACTIONS for a in actions
    ):
        raise ValueError(f"{key}.actions must be a list of ALE action ids 0..17")
    if type(seed) is not int or seed < 0:
        raise ValueError(f"{key}.seed must be a non-negative integer")
    if score is not None and not isinstance(score, int | float):
        raise ValueError(f"{key}.score must be a number or null")
    return Trajectory(tuple(actions), seed, score, str(entry.get("source", "")))


def replay_env(game: str) -> gym.Env:
    """The raw emulator for replays and keyboard play: one frame a step, the full action set
    (index = ALE action id), no sticky actions, no frame cap, RGB observations."""
    return gym.make(
        resolve_game(game).gym_id,
        frameskip=1,
        repeat_action_probability=0.0,
        full_action_space=True,
        max_num_frames_per_episode=0,
        render_mode="rgb_array",
    )


def agent_frames(
    screen_at, k: int, *, frame_skip: int, history_length: int, screen_size: int
) -> np.ndarray:
    """The agent's state at emulator frame ``k``, as make_env + FrameStack would build it had
    the agent been acting on frames k, k - frame_skip, ...: frame j is the pixel-wise max of
    the grayscale screens j - 1 and j (j = 0, the reset screen, alone; no max when frame_skip
    is 1), area-resized; slots before frame 0 are zero. ``screen_at(j)`` is the grayscale
    (210, 160) screen after j frames. Oldest first, uint8 (history_length, size, size)."""
    state = np.zeros((history_length, screen_size, screen_size), dtype=np.uint8)
    first = k - (history_length - 1) * frame_skip
    for slot, j in enumerate(range(first, k + 1, frame_skip)):
        if j < 0:
            continue
        screen = screen_at(j)
        if j > 0 and frame_skip > 1:
            screen = np.maximum(screen_at(j - 1), screen)
        state[slot] = cv2.resize(screen, (screen_size, screen_size), interpolation=cv2.INTER_AREA)
    return state


def sample_start_states(
    log: TrajectoryLog,
    *,
    rng: np.random.Generator,
    count: int = 100,
    frame_skip: int = 4,
    screen_size: int = 84,
    history_length: int = 4,
    max_episode_frames: int = 108_000,
) -> StartStates:
    """Draw ``count`` start points uniformly over the candidate frames (module docstring) and
    replay each trajectory once to capture them, in trajectory and frame order. Raises
    ValueError if there are fewer candidates than ``count`` or a replay diverges from its log."""
    owners, frames = _draw(log, count, rng, max_episode_frames)
    layout = dict(frame_skip=frame_skip, history_length=history_length, screen_size=screen_size)
    env = replay_env(log.game)
    captures = []  # (trajectory index, k, state bytes, agent frames, RGB screen, score so far)
    try:
        for index in range(len(log.trajectories)):
            targets = [int(k) for k in frames[owners == index]]
            captures += [(index, *c) for c in _replay(env, log, index, targets, layout)]
    finally:
        env.close()
    column = list(zip(*captures, strict=True))
    return StartStates(
        game=log.game,
        rom_md5=rom_md5(log.game),
        ale_py_version=ale_py.__version__,
        states=column[2],
        frames=np.stack(column[3]),
        screens=np.stack(column[4]),
        episode_frames=np.array(column[1], dtype=np.int64),
        prefix_scores=np.array(column[5], dtype=np.float64),
        trajectory_indices=np.array(column[0], dtype=np.int64),
        trajectory_frames=np.array(column[1], dtype=np.int64),
        trajectory_sources=tuple(t.source for t in log.trajectories),
        **layout,
    )


def _draw(log: TrajectoryLog, count: int, rng: np.random.Generator, max_episode_frames: int):
    """``count`` distinct candidate frames, uniform over all trajectories' candidates; returns
    (trajectory index, frame within it) arrays, sorted."""
    lengths = np.array(
        [
            min(len(t.actions) * log.frames_per_action, max_episode_frames or 2**62)
            for t in log.trajectories
        ],
        dtype=np.int64,
    )
    total = int(lengths.sum())
    if not 0 < count <= total:
        raise ValueError(
            f"count={count} is not allowed: the trajectories have {total} candidate frames "
            "(need 1 <= count <= candidates)"
        )
    picks = np.sort(rng.choice(total, size=count, replace=False))
    ends = np.cumsum(lengths)
    owners = np.searchsorted(ends, picks, side="right")
    return owners, picks - (ends[owners] - lengths[owners])


def _replay(env: gym.Env, log: TrajectoryLog, index: int, targets: list[int], layout: dict):
    """Replay trajectory ``index`` from its seeded reset; returns (k, state bytes, agent frames,
    RGB screen, score so far) for each target frame k, ascending. Only the grayscale screens
    the agent frames need are kept."""
    trajectory = log.trajectories[index]
    env.reset(seed=trajectory.seed)
    ale = env.unwrapped.ale
    step = layout["frame_skip"]
    chain = range(0, layout["history_length"] * step, step)  # k, k - step, ... (as offsets)
    wanted = {k - back - pair for k in targets for back in chain for pair in (0, 1)}
    screens, score, frame, captures = {}, 0.0, 0, []
    remaining = set(targets)

    def observe():
        if frame in wanted:
            screens[frame] = ale.getScreenGrayscale()
        if frame in remaining:
            state = ale.cloneState().serialize()
            frames = agent_frames(screens.__getitem__, frame, **layout)
            captures.append((frame, state, frames, ale.getScreenRGB(), score))

    observe()
    for action in trajectory.actions:
        for _ in range(log.frames_per_action):
            if ale.game_over():
                raise ValueError(
                    f"trajectory {index} is over at frame {frame} before its last "
                    "action: trim the log or check the game"
                )
            score += ale.act(action)
            frame += 1
            observe()
    if trajectory.score is not None and score != trajectory.score:
        raise ValueError(
            f"trajectory {index} replays to score {score}, its log says "
            f"{trajectory.score}: the emulator diverged from the recording"
        )
    return captures
