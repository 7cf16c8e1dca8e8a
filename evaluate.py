"""Evaluate trained agents under the PER paper's protocols and compare with its Tables 6 and 7.

    python evaluate.py RUN_DIR                                  # no-op starts, best snapshot
    python evaluate.py RUN_DIR protocol=human_starts start_states=pong_starts.npz
    python evaluate.py MULTIRUN_DIR protocol=human_starts start_states=starts/  # <rom_id>.npz
    python evaluate.py RUN_DIR/agent_latest.pt episodes=5 env.max_episode_frames=18000

The path is a snapshot (.pt), a run directory (its ``agent_best.pt``, or ``snapshot=latest``)
or a multirun directory (every run below it). Arguments are ``key=value`` like train.py's:

    protocol=noop|human_starts   noop: 1-30 random no-ops, ε 0.01, 30 episodes per run;
                                 human_starts: one episode per start point, ε 0.001
    snapshot=best|latest         which snapshot of a run directory
    episodes=N                   no-op episodes per run (30), or the first N start points
    epsilon=E                    override the protocol's ε (Table 5)
    start_states=PATH            human_starts: a start-state file, or a directory of <rom_id>.npz
    seed=S                       seeds every evaluation env and ε draw (0)
    device=auto|cpu|cuda[:N]     where the network runs (auto)
    output=DIR                   where evaluation_<protocol>.json/.csv go (the evaluated dir)
    bootstrap_reps=N             resamples for the IQM confidence interval (2000)
    env.KEY=V                    override the run's make_env arguments (env.max_episode_frames)

It prints a table (per game: raw mean ± std, human-normalized score, the paper's Double DQN
scores) and writes it as JSON and CSV. Exit status 2 with a one-line message on bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ale_py
import numpy as np

from artifacts.command_line import unwritable_reason
from envs.atari import make_env
from envs.start_state_file import load_start_states
from evaluation.arguments import check_arguments_of, parse_arguments
from evaluation.protocol_registry import PROTOCOLS, Protocol
from evaluation.runs import RunSpec, find_snapshots
from evaluation.score_table import (
    RunScore,
    format_table,
    game_rows,
    paper_note,
    summaries,
    write_report,
)
from evaluation.scores import normalized_score
from evaluation.snapshot import load_agent_snapshot

DEFAULTS = {
    "protocol": "noop",
    "snapshot": "best",
    "episodes": None,
    "epsilon": None,
    "start_states": None,
    "seed": 0,
    "device": "auto",
    "output": None,
    "bootstrap_reps": 2000,
    "env": {},
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        positional, options = parse_arguments(argv, DEFAULTS, open_sections=("env",))
        if len(positional) != 1:
            raise ValueError("give exactly one path: a snapshot, a run or a multirun directory")
        check_options(options)
        run(Path(positional[0]), options)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def check_options(options: dict) -> None:
    if options["protocol"] not in PROTOCOLS:
        raise ValueError(
            f"protocol={options['protocol']} is not allowed: must be one of {', '.join(PROTOCOLS)}"
        )
    if PROTOCOLS[options["protocol"]].needs_start_states and not options["start_states"]:
        raise ValueError(
            f"protocol={options['protocol']} needs start_states=FILE.npz (or a directory of "
            "<rom_id>.npz); make one with python -m evaluation.start_states sample"
        )
    for key in ("episodes", "bootstrap_reps"):
        value = options[key]
        if value is not None and (type(value) is not int or value < 1):
            raise ValueError(f"{key}={value} is not allowed: must be a positive integer")
    if type(options["seed"]) is not int or options["seed"] < 0:
        raise ValueError(f"seed={options['seed']} is not allowed: must be an integer >= 0")
    epsilon = options["epsilon"]
    if epsilon is not None and not (isinstance(epsilon, int | float) and 0 <= epsilon <= 1):
        raise ValueError(f"epsilon={epsilon} is not allowed: must be in [0, 1]")
    check_arguments_of(make_env, options["env"], "env", skip=("seed",))


def run(path: Path, options: dict) -> None:
    """Evaluate every run under ``path``, print the table, write JSON and CSV."""
    protocol = PROTOCOLS[options["protocol"]]
    specs = find_snapshots(path, options["snapshot"])
    output = (
        Path(options["output"]) if options["output"] else (path if path.is_dir() else path.parent)
    )
    reason = unwritable_reason(output)
    if reason is not None:  # found now, not after the whole evaluation
        raise ValueError(f"output={output} cannot be used: {reason}")
    streams = np.random.SeedSequence(options["seed"]).spawn(len(specs))
    scores, sources = [], set()
    for spec, stream in zip(specs, streams, strict=True):
        print(f"evaluating {spec.name} ({protocol.name}) ...", file=sys.stderr, flush=True)
        score, source = evaluate_run(spec, options, np.random.default_rng(stream))
        scores.append(score)
        sources.add(source)
    header = report_header(options, specs, sorted(s for s in sources if s))
    rows = game_rows(scores, protocol)
    summary = summaries(scores, rows, reps=options["bootstrap_reps"], seed=options["seed"])
    print(format_table(header, rows, summary))
    for written in write_report(output, protocol, header, scores, rows, summary):
        print(f"wrote {written}")


def evaluate_run(spec: RunSpec, options: dict, rng: np.random.Generator) -> tuple[RunScore, str]:
    """One run under the chosen protocol; returns its score row and the start-state file."""
    agent, info = load_agent_snapshot(spec.snapshot, options["device"])
    protocol = PROTOCOLS[options["protocol"]]
    env_kwargs = {"game": info.game, **env_arguments(protocol, spec, options)}
    if env_kwargs["game"] != info.game:
        raise ValueError(
            f"{spec.snapshot} is an agent for {info.game}, but its run config "
            f"says env.game={env_kwargs['game']}"
        )
    starts, source = None, ""
    if protocol.needs_start_states:
        start_file = start_state_file(Path(options["start_states"]), info.game)
        starts, source = load_start_states(start_file, info.game), str(start_file)
    result = protocol.evaluate(
        agent,
        env_kwargs,
        rng=rng,
        epsilon=epsilon_of(protocol, options),
        episodes=options["episodes"] or protocol.budget,
        start_states=starts,
    )
    score = RunScore(
        run=spec.name,
        game=info.game,
        variant=spec.variant,
        seed=spec.seed,
        step=info.step,
        frames=info.frames,
        episodes=len(result.scores),
        mean=result.mean,
        std=result.std,
        normalized=normalized_score(result.mean, info.game, protocol.reference),
        partial=result.partial,
        episode_scores=tuple(result.scores.tolist()),
        start_frames=tuple(result.start_frames.tolist()),
    )
    return score, source


def start_state_file(path: Path, game: str) -> Path:
    """A file is used as is; a directory must hold ``<rom_id>.npz`` for each game."""
    if path.is_dir():
        candidate = path / f"{game}.npz"
        if not candidate.is_file():
            raise ValueError(f"start_states={path} has no {game}.npz for game {game}")
        return candidate
    return path


def env_arguments(protocol: Protocol, spec: RunSpec, options: dict) -> dict:
    """make_env's arguments for a run: its config's, then the env.KEY overrides; the
    protocol's episode cap where neither sets one."""
    return {"max_episode_frames": protocol.max_episode_frames, **spec.env_kwargs, **options["env"]}


def epsilon_of(protocol: Protocol, options: dict) -> float:
    return protocol.epsilon if options["epsilon"] is None else options["epsilon"]


def report_header(options: dict, specs: list[RunSpec], start_files: list[str]) -> dict:
    protocol = PROTOCOLS[options["protocol"]]
    epsilon = epsilon_of(protocol, options)
    used = [env_arguments(protocol, spec, options) for spec in specs]  # what make_env got
    noop_max = {env.get("noop_max", 30) for env in used}
    caps = {env["max_episode_frames"] for env in used}
    title = protocol.title.format(
        noop_max="/".join(map(str, sorted(noop_max))),
        epsilon=epsilon,
        episodes=protocol.budget_text(options["episodes"]),
    )
    cap_text = "/".join(f"{cap:,}" for cap in sorted(caps))
    return {
        "title": f"{title}; episodes capped at {cap_text} frames",
        "paper_note": paper_note(protocol),
        "protocol": protocol.name,
        "epsilon": epsilon,
        "snapshot": options["snapshot"],
        "seed": options["seed"],
        "env_overrides": options["env"],
        "start_states": start_files,
        "ale_py_version": ale_py.__version__,
    }


if __name__ == "__main__":
    sys.exit(main())
