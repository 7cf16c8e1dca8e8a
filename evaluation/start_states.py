"""Command-line tools for human start points: record, sample, verify, show.

    python -m evaluation.start_states record game=pong trajectories=pong_human.json \
        out=pong_starts.npz                    # play with the keyboard, then sample 100 starts
    python -m evaluation.start_states sample pong_human.json [more.json ...] out=pong_starts.npz
    python -m evaluation.start_states verify pong_starts.npz
    python -m evaluation.start_states show pong_starts.npz png=pong_starts.png

``record`` needs pygame (``pip install 'per-atari[play]'``) and a display; ``show`` writes its
PNG with matplotlib. The formats are described in ``envs.start_states`` (start-state files)
and ``envs.trajectories`` (trajectory files). ``sample`` (and so ``record``) writes a file
only once every start point has passed ``envs.trajectories.verify_start_states``; ``verify``
runs that check on an existing file (an evaluation runs it too). Exit status 2 with one line on
bad input, including a game whose states do not restore faithfully.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from envs.games import resolve_game
from envs.start_states import StartStates, load_start_states, save_start_states
from envs.trajectories import (
    Trajectory,
    TrajectoryLog,
    load_trajectories,
    replay_env,
    sample_start_states,
    save_trajectories,
    verify_start_states,
)
from evaluation.arguments import parse_arguments

SAMPLE_DEFAULTS = {
    "out": None,
    "count": 100,
    "seed": 0,
    "frame_skip": 4,
    "screen_size": 84,
    "history_length": 4,
    "max_episode_frames": 108_000,
}
RECORD_DEFAULTS = {
    **SAMPLE_DEFAULTS,
    "game": None,
    "trajectories": None,
    "play_seed": 0,
    "max_frames": 108_000,
    "fps": 60,
    "zoom": 3.0,
}
SHOW_DEFAULTS = {"png": None, "screens": 8}
VERIFY_DEFAULTS: dict = {}


class KeyboardRecorder:
    """The per-frame callback of gymnasium's ``play``: logs ALE action ids, splits the session
    into games (one trajectory each) and ends the session after ``max_frames`` frames."""

    def __init__(self, legal_actions, *, seed: int, max_frames: int | None, source: str):
        self._legal_actions = [a.value for a in legal_actions]  # ale_py.Action -> id
        self.seed, self.max_frames, self.source = seed, max_frames, source
        self.trajectories: list[Trajectory] = []
        self.frames = 0
        self._actions: list[int] = []
        self._score = 0.0

    def __call__(self, obs_before, obs_after, action, reward, terminated, truncated, info):
        self._actions.append(self._legal_actions[int(action)])
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


def record_trajectories(
    game: str,
    *,
    seed: int = 0,
    max_frames: int | None = 108_000,
    fps: int = 60,
    zoom: float = 3.0,
    source: str = "keyboard",
    on_frame=None,
) -> TrajectoryLog:
    """Let a human play ``game`` with the keyboard (gymnasium's ``play``; needs pygame and a
    display) and return the games played as a trajectory log. The session ends with Esc, by
    closing the window, or after ``max_frames`` emulator frames (108,000 = 30 minutes at 60 Hz,
    the amount of human play the paper's start points came from). Every game starts from
    ``reset(seed=seed)``. ``on_frame`` (optional) is called with the frame count after each
    frame. Keys: gymnasium's Atari mapping (w/a/s/d move, space fires, e is no-op)."""
    try:
        from gymnasium.utils.play import play
    except ImportError:
        raise ValueError(
            "keyboard recording needs pygame: pip install 'per-atari[play]' (or pip install pygame)"
        ) from None
    env = replay_env(game)
    recorder = KeyboardRecorder(
        env.unwrapped.ale.getLegalActionSet(), seed=seed, max_frames=max_frames, source=source
    )

    def callback(*transition):
        recorder(*transition)
        if on_frame is not None:
            on_frame(recorder.frames)

    try:
        play(env, fps=fps, zoom=zoom, callback=callback, seed=seed, noop=0)
    finally:
        env.close()
    recorder.finish()
    if not recorder.trajectories:
        raise ValueError("no frame was played: nothing to record")
    return TrajectoryLog(resolve_game(game).rom_id, tuple(recorder.trajectories), 1)


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


def sample_command(paths: list[Path], options: dict) -> StartStates:
    if not paths or not options["out"]:
        raise ValueError("sample needs trajectory files and out=FILE.npz")
    starts = sample_start_states(
        merge_logs(paths),
        rng=np.random.default_rng(options["seed"]),
        **{key: options[key] for key in SAMPLE_DEFAULTS if key not in ("out", "seed")},
    )
    save_start_states(options["out"], starts)
    print(f"wrote {len(starts)} start points of {starts.game} to {options['out']}")
    return starts


def record_command(options: dict) -> StartStates:
    if not (options["game"] and options["trajectories"] and options["out"]):
        raise ValueError("record needs game=NAME, trajectories=FILE.json and out=FILE.npz")
    log = record_trajectories(
        options["game"],
        seed=options["play_seed"],
        max_frames=options["max_frames"],
        fps=options["fps"],
        zoom=options["zoom"],
    )
    save_trajectories(options["trajectories"], log)
    frames = sum(len(t.actions) for t in log.trajectories)
    print(f"wrote {len(log.trajectories)} game(s), {frames} frames, to {options['trajectories']}")
    return sample_command([Path(options["trajectories"])], options)


def verify_command(paths: list[Path]) -> str:
    """Replay and restore every start point of one file (what an evaluation checks first)."""
    if len(paths) != 1:
        raise ValueError("verify needs exactly one start-state file")
    starts = load_start_states(paths[0])
    began = time.perf_counter()
    verify_start_states(starts)
    return (
        f"{paths[0]}: all {len(starts)} start points of {starts.game} restore faithfully "
        f"(verified in {time.perf_counter() - began:.1f} s)"
    )


def show_command(paths: list[Path], options: dict) -> str:
    """A text summary of a start-state file, and optionally a PNG of a few start screens."""
    if len(paths) != 1:
        raise ValueError("show needs exactly one start-state file")
    starts = load_start_states(paths[0])
    frames = starts.episode_frames
    lines = [
        f"{paths[0]}: {len(starts)} start points of {resolve_game(starts.game).name} "
        f"({starts.game}, ROM MD5 {starts.rom_md5}, ale-py {starts.ale_py_version})",
        f"agent state: {starts.history_length} frames of {starts.screen_size}x"
        f"{starts.screen_size}, frame skip {starts.frame_skip}; start frame numbers: min "
        f"{frames.min()}, median {int(np.median(frames))}, max {frames.max()}",
        f"human score at the start: min {starts.prefix_scores.min():g}, "
        f"max {starts.prefix_scores.max():g}",
    ]
    for index, source in enumerate(starts.trajectory_sources):
        mine = frames[starts.trajectory_indices == index]
        lines.append(
            f"trajectory {index} ({source or 'no source given'}): {len(mine)} starts at frames "
            + ", ".join(map(str, mine))
        )
    if options["png"]:
        write_png(starts, Path(options["png"]), options["screens"])
        lines.append(f"wrote {options['png']}")
    return "\n".join(lines)


def write_png(starts: StartStates, path: Path, shown: int) -> None:
    """A grid of ``shown`` start screens, evenly spread over the file, each titled with its
    frame number and trajectory."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    from matplotlib import pyplot

    picks = np.unique(np.linspace(0, len(starts) - 1, min(shown, len(starts))).astype(int))
    columns = min(4, len(picks))
    rows = -(-len(picks) // columns)
    figure, axes = pyplot.subplots(rows, columns, figsize=(2.4 * columns, 3.4 * rows))
    for axis in np.ravel(axes):
        axis.axis("off")
    for axis, index in zip(np.ravel(axes), picks, strict=False):
        axis.imshow(starts.screens[index])
        axis.set_title(
            f"start {index}: frame {starts.episode_frames[index]}\n"
            f"trajectory {starts.trajectory_indices[index]}",
            fontsize=8,
        )
    figure.suptitle(f"{resolve_game(starts.game).name}: {len(starts)} start points", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


COMMANDS = {
    "record": RECORD_DEFAULTS,
    "sample": SAMPLE_DEFAULTS,
    "verify": VERIFY_DEFAULTS,
    "show": SHOW_DEFAULTS,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if not argv or argv[0] in ("-h", "--help"):
            print(__doc__)
            return 0
        if argv[0] not in COMMANDS:
            raise ValueError(f"unknown command {argv[0]!r}: use one of {', '.join(COMMANDS)}")
        command = argv[0]
        positional, options = parse_arguments(argv[1:], COMMANDS[command])
        paths = [Path(p) for p in positional]
        if command == "record":
            record_command(options)
        elif command == "sample":
            sample_command(paths, options)
        elif command == "verify":
            print(verify_command(paths))
        else:
            print(show_command(paths, options))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
