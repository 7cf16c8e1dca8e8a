"""Command-line tools for human start points: record, play, sample, verify, show.

    python -m evaluation.human_starts record game=pong trajectories=pong_human.json \
        out=pong_starts.npz                    # play with the keyboard, then sample 100 starts
    python -m evaluation.human_starts play RUN_DIR out=agent_play.json episodes=5 seed=0 \
        [epsilon=0.01] [snapshot=best|latest|final] [device=auto] [env.KEY=V ...]
    python -m evaluation.human_starts sample pong_human.json [more.json ...] out=pong_starts.npz
    python -m evaluation.human_starts verify pong_starts.npz
    python -m evaluation.human_starts show pong_starts.npz png=pong_starts.png

``record`` needs pygame (``pip install '.[play]'``) and a display; ``play`` logs an agent's
ε-greedy games with its run's env settings instead. ``sample`` (and so ``record``) writes a file
only once every start point is verified; ``verify`` checks an existing file, as an evaluation
does. Exit status 2 with one line on bad input, including a game whose states do not restore
faithfully.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from artifacts.command_line import unwritable_reason
from artifacts.run_directory import FINAL_SNAPSHOT, RunDirectory
from envs.games import resolve_game
from envs.registry import environment_kind
from envs.settings import AtariSettings
from evaluation.arguments import parse_arguments
from evaluation.human_starts.recording import (
    display_problem,
    play_trajectories,
    record_trajectories,
)
from evaluation.human_starts.sampling import sample_start_states
from evaluation.human_starts.start_state_file import (
    StartStates,
    load_start_states,
    save_start_states,
)
from evaluation.human_starts.trajectories import merge_logs, save_trajectories
from evaluation.human_starts.verification import verify_start_states
from evaluation.runs import SNAPSHOT_NAMES, find_snapshots
from schema import FRACTION, NON_NEGATIVE_INTEGER, POSITIVE_INTEGER, one_of, typed

# What a start point's agent state is made of, as a start-state file records it.
LAYOUT = ("frame_skip", "screen_size", "history_length", "max_episode_frames")
PLAY_DEFAULTS = {
    "out": None,
    "episodes": 5,
    "seed": 0,
    "epsilon": 0.01,
    "snapshot": "best",
    "device": "auto",
    "env": {},
}
PLAY_SNAPSHOTS = {**SNAPSHOT_NAMES, "final": FINAL_SNAPSHOT}
PLAY_RULES = {
    "episodes": POSITIVE_INTEGER,
    "seed": NON_NEGATIVE_INTEGER,
    "epsilon": FRACTION,
    "snapshot": one_of(PLAY_SNAPSHOTS),
}
SHOW_DEFAULTS = {"png": None, "screens": 8}


def layout_defaults() -> dict:
    """The paper's agent's `LAYOUT`. agents.settings is imported here: it loads torch, which
    `verify` and `show` do without."""
    from agents.settings import AgentSettings

    defaults = {**AtariSettings.defaults(), **AgentSettings.defaults()}
    return {key: defaults[key] for key in LAYOUT}


def sample_defaults() -> dict:
    return {"out": None, "count": 100, "seed": 0, **layout_defaults()}


def record_defaults() -> dict:
    return {
        **sample_defaults(),
        "game": None,
        "trajectories": None,
        "play_seed": 0,
        # 30 minutes at 60 Hz, the amount of human play the paper's start points came from
        "max_frames": 108_000,
        "fps": 60,
        "zoom": 3.0,
    }


def check_output(key: str, path: Path) -> None:
    """Refuse an output file that cannot be written now, not after the work."""
    if path.is_dir():
        raise ValueError(f"{key}={path} is a directory: give a file name")
    reason = unwritable_reason(path.parent)
    if reason is not None:
        raise ValueError(f"{key}={path} cannot be written: {reason}")


def sample_command(paths: list[Path], options: dict) -> None:
    if not paths or not options["out"]:
        raise ValueError("sample needs trajectory files and out=FILE.npz")
    check_output("out", Path(options["out"]))
    starts = sample_start_states(
        merge_logs(paths),
        rng=np.random.default_rng(options["seed"]),
        count=options["count"],
        **{key: options[key] for key in LAYOUT},
    )
    save_start_states(options["out"], starts)
    print(f"wrote {len(starts)} start points of {starts.game} to {options['out']}")


def record_command(options: dict) -> None:
    if not (options["game"] and options["trajectories"] and options["out"]):
        raise ValueError("record needs game=NAME, trajectories=FILE.json and out=FILE.npz")
    for key in ("trajectories", "out"):
        check_output(key, Path(options[key]))
    problem = display_problem()
    if problem is not None:
        raise ValueError(f"record needs a display a human plays on: {problem}")
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
    sample_command([Path(options["trajectories"])], options)


def play_command(paths: list[Path], options: dict) -> None:
    """An agent's own games as a trajectory file; everything is checked before the first."""
    if len(paths) != 1 or not options["out"]:
        raise ValueError("play needs one run directory or agent snapshot and out=FILE.json")
    for key, rule in PLAY_RULES.items():
        rule.check(key, options[key])
    typed(AtariSettings, options["env"], fixed=("kind",))
    out = Path(options["out"])
    check_output("out", out)
    if not (paths[0].is_file() or RunDirectory(paths[0]).config_file.is_file()):
        raise ValueError(
            f"{paths[0]} is neither an agent snapshot (.pt) nor a run directory (with config.yaml)"
        )
    (run,) = find_snapshots(paths[0], options["snapshot"], PLAY_SNAPSHOTS)
    environment = environment_kind(run.env_kind)
    if not environment.has_human_reference:  # trajectory files log ALE actions: Atari only
        raise ValueError(
            f"play is not available for env.kind={run.env_kind}: the {environment.family} "
            "games have no human start states"
        )
    # Imported here: torch loads in seconds, and the other commands do not need it.
    from artifacts.snapshot import load_agent_snapshot

    agent, info = load_agent_snapshot(run.snapshot, options["device"])
    env_kwargs = {"game": info.game, **run.env_kwargs, **options["env"]}
    if resolve_game(str(env_kwargs["game"])).rom_id != info.game:
        raise ValueError(f"{run.snapshot} is an agent for {info.game}, not {env_kwargs['game']}")
    rng = np.random.default_rng(options["seed"])
    seeds = [int(seed) for seed in rng.integers(2**31, size=options["episodes"])]
    epsilon, play_seed = options["epsilon"], options["seed"]
    source = f"agent {run.snapshot} (step {info.step}) play seed {play_seed} epsilon {epsilon}"
    log = play_trajectories(
        agent, env_kwargs, reset_seeds=seeds, epsilon=epsilon, rng=rng, source=source
    )
    try:
        save_trajectories(out, log)
    except OSError as error:  # a directory os.access called writable, as root can see
        raise ValueError(f"out={out} could not be written: {error.strerror}") from None
    scores = ", ".join(f"{t.score:g}" for t in log.trajectories)
    frames = sum(len(t.actions) for t in log.trajectories)
    print(f"wrote {len(seeds)} game(s) of {log.game}, {frames} frames, scores {scores}, to {out}")


def verify_command(paths: list[Path]) -> str:
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
    """A grid of ``shown`` start screens, evenly spread over the file."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display backend

    picks = np.unique(np.linspace(0, len(starts) - 1, min(shown, len(starts))).astype(int))
    columns = min(4, len(picks))
    rows = -(-len(picks) // columns)
    figure = Figure(figsize=(2.4 * columns, 3.4 * rows))
    axes = figure.subplots(rows, columns)
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


# Each command's options (a function: `layout_defaults` loads torch, only for the commands that
# use it) and what runs it on the paths and the options.
COMMANDS = {
    "record": (record_defaults, lambda paths, options: record_command(options)),
    "play": (PLAY_DEFAULTS.copy, play_command),
    "sample": (sample_defaults, sample_command),
    "verify": (dict, lambda paths, options: print(verify_command(paths))),
    "show": (SHOW_DEFAULTS.copy, lambda paths, options: print(show_command(paths, options))),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if not argv or argv[0] in ("-h", "--help"):
            print(__doc__)
            return 0
        if argv[0] not in COMMANDS:
            raise ValueError(f"unknown command {argv[0]!r}: use one of {', '.join(COMMANDS)}")
        defaults, command = COMMANDS[argv[0]]
        positional, options = parse_arguments(argv[1:], defaults())
        command([Path(p) for p in positional], options)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
