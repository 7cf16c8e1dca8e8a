"""Whether start points are what their action prefixes reach, and restore faithfully: the two
checks of docs/evaluation.md, "Restore fidelity"."""

from __future__ import annotations

import zlib

import ale_py
import gymnasium as gym
import numpy as np

from envs.atari import make_env
from evaluation.human_starts.start_state_file import (
    RAM_SIZE,
    StartStates,
    digest,
    file_arrays,
    restore_start,
)
from evaluation.human_starts.trajectories import replay_env

# Frames compared after each restore. Every divergence benchmarks/restore_fidelity.py found
# showed on the first frame after the restore; 1,000 frames (17 s of play) leave a wide margin
# at a cost of about 1,000 emulator frames per start point.
VERIFY_HORIZON = 1000
# The start sets verified in this process, by what verification depends on: the game, the
# emulator, the horizon and every array the start set's file stores.
_verified: set[str] = set()


def verify_start_states(starts: StartStates, horizon: int = VERIFY_HORIZON) -> None:
    """A one-line ValueError unless every start point is faithful; once per start set."""
    key = f"{starts.game}|{ale_py.__version__}|{horizon}|{digest(file_arrays(starts))}"
    if key in _verified:
        return
    # `env` is restored into as the evaluator's env is.
    with make_env(starts.game, seed=0, noop_max=0) as env, replay_env(starts.game) as replay:
        for trajectory in np.unique(starts.trajectory_indices):
            members = np.flatnonzero(starts.trajectory_indices == trajectory)
            truth = replay_truth(replay, starts, int(trajectory), members, horizon)
            for index in members:
                check_restore(env, starts, int(index), *truth, horizon)
    _verified.add(key)


def replay_truth(
    env: gym.Env, starts: StartStates, trajectory: int, members: np.ndarray, horizon: int
):
    """Replay ``trajectory``, checking its members' stored states and RAM. Returns the per-frame
    actions (NOOP past the log) and, at index j in the ``horizon`` frames after each member, the
    RAM and a CRC-32 of the screen after frame j + 1."""
    checks: dict[int, list[tuple[str, int]]] = {}  # frame -> (what, start point)
    starts_at = [int(starts.trajectory_frames[index]) for index in members]
    for frame, index in zip(starts_at, members, strict=True):
        checks.setdefault(max(frame - 1, 0), []).append(("ALE state", int(index)))
        checks.setdefault(frame, []).append(("RAM", int(index)))
    end = max(starts_at) + horizon
    actions = starts.actions(trajectory)
    stream = np.pad(actions, (0, max(end - len(actions), 0)))  # NOOPs (ALE action 0) past the log
    watched = np.zeros(end, dtype=bool)
    for frame in starts_at:
        watched[frame : frame + horizon] = True
    rams = np.zeros((end, RAM_SIZE), dtype=np.uint8)
    screens = np.zeros(end, dtype=np.uint32)
    env.reset(seed=int(starts.trajectory_seeds[trajectory]))
    ale, screen = env.unwrapped.ale, np.empty((210, 160), dtype=np.uint8)
    for frame in range(end):
        for part, index in checks.get(frame, ()):
            check_prefix(ale, starts, index, part)
        ale.act(int(stream[frame]))
        if watched[frame]:
            rams[frame] = ale.getRAM()
            ale.getScreen(screen)  # into the buffer: no allocation per frame
            screens[frame] = zlib.crc32(screen)
    return stream, rams, screens


def check_prefix(ale: ale_py.ALEInterface, starts: StartStates, index: int, part: str) -> None:
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


def check_restore(env, starts: StartStates, index: int, stream, rams, screens, horizon: int):
    """Enter start point ``index``: RAM and screen must then be the replay's, frame by frame."""
    env.reset()
    ale, screen = env.unwrapped.ale, np.empty((210, 160), dtype=np.uint8)
    try:
        restore_start(ale, starts, index)
    except ValueError:
        raise unfaithful(starts, index, "RAM", "on the start frame itself") from None
    start = int(starts.episode_frames[index])
    for frame in range(start, start + horizon):
        ale.act(int(stream[frame]))
        ale.getScreen(screen)
        part = "RAM" if not np.array_equal(ale.getRAM(), rams[frame]) else "screen"
        if part == "RAM" or zlib.crc32(screen) != screens[frame]:
            when = f"{frame + 1 - start} frame(s) after the restore"
            raise unfaithful(starts, index, part, when)


def unfaithful(starts: StartStates, index: int, part: str, when: str) -> ValueError:
    game, start = starts.game, int(starts.episode_frames[index])
    return ValueError(
        f"{game}: start point {index} (frame {start}) does not restore faithfully in ale-py "
        f"{ale_py.__version__}: the restored game's {part} left the replayed one {when}, so "
        f"its human-start scores would be wrong; {game} cannot be evaluated from human starts "
        "with this ale-py (docs/evaluation.md, restore fidelity)"
    )
