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

Verification (``verify_start_states``; sampling runs it before it returns, the human-starts
evaluation before it plays): each trajectory is replayed from its seeded reset, which must
reach every start point's stored RAM and state bytes; then each start point is restored into
an evaluation env the way the evaluator restores it (``envs.start_states.restore_start``) and
both play the human's next ``VERIFY_HORIZON`` frames (NOOPs past the end of the log): RAM and
screen must match the replay on every frame, or the start points are refused.

Command line (record with the keyboard, sample, verify, show):
``python -m evaluation.start_states``.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import ale_py
import cv2
import gymnasium as gym
import numpy as np

from envs.atari import make_env
from envs.games import resolve_game
from envs.start_states import StartStates, restore_start, rom_md5

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
    """Draw ``count`` start points uniformly over the candidate frames (module docstring),
    replay each trajectory once to capture them, in trajectory and frame order, and verify
    them (``verify_start_states``). Raises ValueError if there are fewer candidates than
    ``count``, a replay diverges from its log, or the game's states do not restore faithfully."""
    owners, frames = _draw(log, count, rng, max_episode_frames)
    layout = dict(frame_skip=frame_skip, history_length=history_length, screen_size=screen_size)
    env = replay_env(log.game)
    captures = []  # (trajectory, k, state bytes, agent frames, RGB screen, score so far, RAM)
    try:
        for index in range(len(log.trajectories)):
            targets = [int(k) for k in frames[owners == index]]
            captures += [(index, *c) for c in _replay(env, log, index, targets, layout)]
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
    """Replay trajectory ``index`` from its seeded reset; returns (k, state bytes of frame
    k - 1 (of frame 0 for k = 0: see ``restore_start``), agent frames, RGB screen, score so far,
    RAM) for each target frame k, ascending. Only the grayscale screens the agent frames need
    are kept."""
    trajectory = log.trajectories[index]
    env.reset(seed=trajectory.seed)
    ale = env.unwrapped.ale
    step = layout["frame_skip"]
    chain = range(0, layout["history_length"] * step, step)  # k, k - step, ... (as offsets)
    wanted = {k - back - pair for k in targets for back in chain for pair in (0, 1)}
    screens, score, frame, captures = {}, 0.0, 0, []
    remaining, states = set(targets), {}
    lead_ins = {max(k - 1, 0) for k in targets}

    def observe():
        if frame in wanted:
            screens[frame] = ale.getScreenGrayscale()
        if frame in lead_ins:
            states[frame] = ale.cloneState().serialize()
        if frame in remaining:
            state = states[max(frame - 1, 0)]
            frames = agent_frames(screens.__getitem__, frame, **layout)
            captures.append((frame, state, frames, ale.getScreenRGB(), score, ale.getRAM().copy()))

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


def verify_start_states(starts: StartStates, horizon: int = VERIFY_HORIZON) -> None:
    """Refuse, with a one-line ValueError, start points that their action prefix does not reach
    from its seeded reset, or whose restore does not go on exactly like that replay for
    ``horizon`` frames (module docstring). A start set passes once per process: later calls
    with the same content return at once."""
    fingerprint = _fingerprint(starts, horizon)
    if fingerprint in _verified:
        return
    env = make_env(starts.game, seed=0, noop_max=0)  # restored into as the evaluator does
    replay = replay_env(starts.game)
    try:
        for trajectory in np.unique(starts.trajectory_indices):
            members = np.flatnonzero(starts.trajectory_indices == trajectory)
            truth = _replay_truth(replay, starts, int(trajectory), members, horizon)
            for index in members:
                _check_restore(env, starts, int(index), *truth, horizon)
    finally:
        env.close()
        replay.close()
    _verified.add(fingerprint)


def _replay_truth(
    env: gym.Env, starts: StartStates, trajectory: int, members: np.ndarray, horizon: int
):
    """Replay ``trajectory`` from its seeded reset, checking each member start point's stored
    state (on the frame before it) and RAM. Returns the per-frame actions (NOOP past the log)
    and, in the ``horizon`` frames after each member, the RAM and a CRC-32 of the screen after
    frame j + 1 at index j."""
    checks: dict[int, list[tuple[str, int]]] = {}  # frame -> (what, start point)
    starts_at = [int(starts.trajectory_frames[index]) for index in members]
    for frame, index in zip(starts_at, members, strict=True):
        checks.setdefault(max(frame - 1, 0), []).append(("ALE state", int(index)))
        checks.setdefault(frame, []).append(("RAM", int(index)))
    end = max(starts_at) + horizon
    actions = starts.actions(trajectory)
    stream = np.zeros(max(end, len(actions)), dtype=np.uint8)  # ALE action 0 is NOOP
    stream[: len(actions)] = actions
    watched = np.zeros(end, dtype=bool)
    for frame in starts_at:
        watched[frame : frame + horizon] = True
    rams = np.zeros((end, 128), dtype=np.uint8)
    screens = np.zeros(end, dtype=np.uint32)
    env.reset(seed=int(starts.trajectory_seeds[trajectory]))
    ale, screen = env.unwrapped.ale, np.empty((210, 160), dtype=np.uint8)
    for frame in range(end):
        for part, index in checks.get(frame, ()):
            _check_prefix(ale, starts, index, part)
        ale.act(int(stream[frame]))
        if watched[frame]:
            rams[frame] = ale.getRAM()
            ale.getScreen(screen)  # into the buffer: no allocation per frame
            screens[frame] = zlib.crc32(screen)
    return stream, rams, screens


def _check_prefix(ale: ale_py.ALEInterface, starts: StartStates, index: int, part: str) -> None:
    """The replayed emulator's RAM or ALE state must be the one stored for ``index``."""
    if part == "RAM" and np.array_equal(ale.getRAM(), starts.rams[index]):
        return
    if part == "ALE state" and ale.cloneState().serialize() == starts.states[index]:
        return
    trajectory = int(starts.trajectory_indices[index])
    raise ValueError(
        f"start point {index} (frame {int(starts.trajectory_frames[index])} of trajectory "
        f"{trajectory}) is not what its action prefix reaches from reset(seed="
        f"{int(starts.trajectory_seeds[trajectory])}): its stored {part} differs; the start "
        "states were altered or made by other code: sample them again"
    )


def _check_restore(env, starts: StartStates, index: int, stream, rams, screens, horizon: int):
    """Restore start point ``index`` into ``env`` like the evaluator and play the replay's next
    ``horizon`` frames: every frame's RAM and screen must be the replay's."""
    env.reset()
    ale, screen = env.unwrapped.ale, np.empty((210, 160), dtype=np.uint8)
    try:
        restore_start(ale, starts, index)
    except ValueError:
        raise _unfaithful(starts, index, "RAM", "on the start frame itself") from None
    start = int(starts.episode_frames[index])
    for frame in range(start, start + horizon):
        ale.act(int(stream[frame]))
        ale.getScreen(screen)
        part = "RAM" if not np.array_equal(ale.getRAM(), rams[frame]) else "screen"
        if part == "RAM" or zlib.crc32(screen) != screens[frame]:
            when = f"{frame + 1 - start} frame(s) after the restore"
            raise _unfaithful(starts, index, part, when)


def _unfaithful(starts: StartStates, index: int, part: str, when: str) -> ValueError:
    game, start = starts.game, int(starts.episode_frames[index])
    return ValueError(
        f"{game}: start point {index} (frame {start}) does not restore faithfully in ale-py "
        f"{ale_py.__version__}: the restored game's {part} left the replayed one {when}, so "
        f"its human-start scores would be wrong; {game} cannot be evaluated from human starts "
        "with this ale-py (docs/evaluation.md, restore fidelity)"
    )


def _fingerprint(starts: StartStates, horizon: int) -> str:
    """SHA-256 of everything verification depends on."""
    digest = hashlib.sha256(f"{starts.game}|{ale_py.__version__}|{horizon}|".encode())
    for array in (
        starts.rams,
        starts.episode_frames,
        starts.trajectory_indices,
        starts.trajectory_frames,
        starts.trajectory_seeds,
    ):
        digest.update(np.ascontiguousarray(array).tobytes())
    for items in (starts.states, starts.trajectory_actions):
        for item in items:
            digest.update(len(item).to_bytes(8, "little") + item)
    return digest.hexdigest()
