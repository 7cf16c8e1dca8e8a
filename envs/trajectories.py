"""Play (a human's, or an agent's) as action logs, and start points sampled from them by
replay in the emulator.

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
gives proportionally more starts (the drawing and capturing: ``envs.start_sampling``).

Verification (``verify_start_states``; sampling runs it before it returns, the human-starts
evaluation before it plays): each trajectory is replayed from its seeded reset, which must
reach every start point's stored RAM and state bytes; then each start point is restored into
an evaluation env the way the evaluator restores it (``envs.start_state_file.restore_start``) and
both play the human's next ``VERIFY_HORIZON`` frames (NOOPs past the end of the log): RAM and
screen must match the replay on every frame, or the start points are refused (the replays
and comparisons: ``envs.start_verification``).

Trajectory files come from keyboard play or from an agent's games (``envs.recording``). Command
line (record, play, sample, verify, show): ``python -m evaluation.start_states``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import ale_py
import gymnasium as gym
import numpy as np

from envs.atari import make_env
from envs.games import resolve_game
from envs.start_sampling import capture_starts, draw_frames
from envs.start_state_checks import rom_md5
from envs.start_state_file import StartStates
from envs.start_verification import check_restore, fingerprint, replay_truth

gym.register_envs(ale_py)

FORMAT = "per-atari-trajectories"
VERSION = 1
NUM_ALE_ACTIONS = 18
# Frames compared after each restore. Every divergence benchmarks/restore_fidelity.py found
# showed on the first frame after the restore; 1,000 frames (17 s of play) leave a wide margin
# at a cost of about 1,000 emulator frames per start point.
VERIFY_HORIZON = 1000
_verified: set[str] = set()  # fingerprints of start sets verified in this process


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
    """Write ``log`` to ``path`` atomically: a reader sees the old file or the whole new one."""
    # Imported here: artifacts.atomic brings torch (3 s), which reading and replaying do not need.
    from artifacts.atomic import write_atomically

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


def merge_logs(paths: list[Path]) -> TrajectoryLog:
    """One log from several trajectory files of the same game and action duration; each
    trajectory's source names its file."""
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
    """Draw ``count`` start points uniformly over the candidate frames (module docstring),
    replay each trajectory once to capture them, in trajectory and frame order, and verify
    them (``verify_start_states``). Raises ValueError if there are fewer candidates than
    ``count``, a replay diverges from its log, or the game's states do not restore faithfully."""
    owners, frames = draw_frames(log, count, rng, max_episode_frames)
    layout = dict(frame_skip=frame_skip, history_length=history_length, screen_size=screen_size)
    env = replay_env(log.game)
    captures = []  # (trajectory, k, state bytes, agent frames, RGB screen, score so far, RAM)
    try:
        for index in range(len(log.trajectories)):
            targets = [int(k) for k in frames[owners == index]]
            captures += [(index, *c) for c in capture_starts(env, log, index, targets, layout)]
    finally:
        env.close()
    column = list(zip(*captures, strict=True))
    starts = StartStates(
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
        rams=np.stack(column[6]),
        trajectory_seeds=np.array([t.seed for t in log.trajectories], dtype=np.int64),
        trajectory_actions=tuple(
            np.repeat(np.array(t.actions, dtype=np.uint8), log.frames_per_action).tobytes()
            for t in log.trajectories
        ),
        **layout,
    )
    verify_start_states(starts)
    return starts


def verify_start_states(starts: StartStates, horizon: int = VERIFY_HORIZON) -> None:
    """Refuse, with a one-line ValueError, start points that their action prefix does not reach
    from its seeded reset, or whose restore does not go on exactly like that replay for
    ``horizon`` frames (module docstring). A start set passes once per process: later calls
    with the same content return at once."""
    key = fingerprint(starts, horizon)
    if key in _verified:
        return
    env = make_env(starts.game, seed=0, noop_max=0)  # restored into as the evaluator does
    replay = replay_env(starts.game)
    try:
        for trajectory in np.unique(starts.trajectory_indices):
            members = np.flatnonzero(starts.trajectory_indices == trajectory)
            truth = replay_truth(replay, starts, int(trajectory), members, horizon)
            for index in members:
                check_restore(env, starts, int(index), *truth, horizon)
    finally:
        env.close()
        replay.close()
    _verified.add(key)
