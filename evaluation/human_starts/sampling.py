"""Start points sampled from trajectories: ``count`` distinct emulator frames below the episode
cap, drawn uniformly over all trajectories' (after Nair et al. 2015); each trajectory is then
replayed once to capture its start points, which are returned only once verified."""

from __future__ import annotations

import ale_py
import cv2
import gymnasium as gym
import numpy as np

from evaluation.human_starts.start_state_file import StartStates
from evaluation.human_starts.trajectories import TrajectoryLog, replay_env, rom_md5
from evaluation.human_starts.verification import verify_start_states


def agent_frames(
    screen_at, k: int, *, frame_skip: int, history_length: int, screen_size: int
) -> np.ndarray:
    """The agent's state at emulator frame ``k`` as make_env + FrameStack build it from frames
    k, k - frame_skip, ... (oldest first, zero before frame 0); ``screen_at(j)`` is the
    grayscale screen after j frames."""
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


def draw_frames(log: TrajectoryLog, count: int, rng: np.random.Generator, max_episode_frames: int):
    """``count`` distinct candidate frames as sorted (trajectory, frame within it) arrays."""
    frames = [len(t.actions) * log.frames_per_action for t in log.trajectories]
    lengths = np.minimum(np.array(frames, dtype=np.int64), max_episode_frames or 2**62)
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


def capture_starts(env: gym.Env, log: TrajectoryLog, index: int, targets: list[int], layout: dict):
    """(k, state of frame max(k - 1, 0), agent frames, screen, score, RAM) per target frame k."""
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
    for action in np.repeat(trajectory.actions, log.frames_per_action):
        if ale.game_over():
            raise ValueError(
                f"trajectory {index} is over at frame {frame} before its last "
                "action: trim the log or check the game"
            )
        score += ale.act(int(action))
        frame += 1
        observe()
    if trajectory.score is not None and score != trajectory.score:
        raise ValueError(
            f"trajectory {index} replays to score {score}, its log says "
            f"{trajectory.score}: the emulator diverged from the recording"
        )
    return captures


def sample_start_states(
    log: TrajectoryLog,
    *,
    rng: np.random.Generator,
    count: int,
    frame_skip: int,
    screen_size: int,
    history_length: int,
    max_episode_frames: int,
) -> StartStates:
    """``count`` verified start points in trajectory and frame order; ValueError when there are
    fewer candidates, a replay diverges from its log, or the states do not restore faithfully."""
    owners, frames = draw_frames(log, count, rng, max_episode_frames)
    layout = dict(frame_skip=frame_skip, history_length=history_length, screen_size=screen_size)
    captures = []  # (trajectory, k, state bytes, agent frames, RGB screen, score so far, RAM)
    with replay_env(log.game) as env:
        for index in range(len(log.trajectories)):
            targets = [int(k) for k in frames[owners == index]]
            captures += [(index, *c) for c in capture_starts(env, log, index, targets, layout)]
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
