"""Trajectory files: play as action logs that replay exactly. JSON, never a pickle::

    {"format": "per-atari-trajectories", "version": 1, "game": "pong", "frames_per_action": 1,
     "trajectories": [{"seed": 0, "actions": [0, 0, 3, ...], "score": -3.0, "source": "..."}]}

``actions`` are ALE action ids of the full action set, each held ``frames_per_action`` emulator
frames, replayed in ``replay_env`` from ``reset(seed=seed)``; ``score``, if given, is checked
against the replay, and so are ``rom_md5`` and ``ale_py_version``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import ale_py
import gymnasium as gym

from artifacts.atomic import write_atomically
from artifacts.header import Header
from envs.games import resolve_game

gym.register_envs(ale_py)

TRAJECTORIES = Header("per-atari-trajectories", 1, "trajectory file")
NUM_ALE_ACTIONS = 18


@dataclass(frozen=True)
class Trajectory:
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
        **TRAJECTORIES.fields(),
        "game": resolve_game(log.game).rom_id,
        "rom_md5": rom_md5(log.game),
        "ale_py_version": ale_py.__version__,
        "frames_per_action": log.frames_per_action,
        "trajectories": [
            {"seed": t.seed, "score": t.score, "source": t.source, "actions": list(t.actions)}
            for t in log.trajectories
        ],
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(document, separators=(",", ":")) + "\n").encode())


def load_trajectories(path: str | os.PathLike) -> TrajectoryLog:
    """Read and check a trajectory file; one-line ValueError naming the file and the key."""
    path = Path(path)
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"trajectory file {path} is unreadable or not JSON: {error}") from None
    TRAJECTORIES.check(path, document)

    def fail(key: str, allowed: str):
        raise ValueError(f"trajectory file {path}: {key} must be {allowed}")

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


def merge_logs(paths: list[Path]) -> TrajectoryLog:
    """One log from files of the same game and action duration; each source names its file."""
    logs = [load_trajectories(path) for path in paths]
    for path, log in zip(paths[1:], logs[1:], strict=True):
        if (log.game, log.frames_per_action) != (logs[0].game, logs[0].frames_per_action):
            raise ValueError(
                f"trajectory file {path} is for {log.game} with frames_per_action="
                f"{log.frames_per_action}, {paths[0]} for {logs[0].game} with "
                f"{logs[0].frames_per_action}: sample one game at a time"
            )
    trajectories = tuple(
        replace(t, source=f"{path.name}[{i}] {t.source}".strip())
        for path, log in zip(paths, logs, strict=True)
        for i, t in enumerate(log.trajectories)
    )
    return TrajectoryLog(logs[0].game, trajectories, logs[0].frames_per_action)


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


@functools.cache
def rom_md5(game: str) -> str:
    """MD5 of the installed ROM of ``game``: a log or a state replays only in its own ROM."""
    rom_id = resolve_game(game).rom_id
    return hashlib.md5(Path(ale_py.roms.get_rom_path(rom_id)).read_bytes()).hexdigest()
