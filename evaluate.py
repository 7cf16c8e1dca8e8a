"""Evaluate trained agents under the PER paper's protocols and compare with its Tables 6 and 7.

    python evaluate.py RUN_DIR                                  # no-op starts, best snapshot
    python evaluate.py RUN_DIR protocol=human_starts start_states=pong_starts.npz
    python evaluate.py MULTIRUN_DIR protocol=human_starts start_states=starts/  # <rom_id>.npz
    python evaluate.py RUN_DIR/agent_latest.pt episodes=5 env.max_episode_frames=18000
    python evaluate.py MINATAR_RUN_DIR episodes=100              # raw scores (episodes)

The path is a snapshot (.pt), a run directory (its ``agent_best.pt``, or ``snapshot=latest``)
or a multirun directory (every run below it). Arguments are ``key=value``, read as train.py's
Hydra reads its overrides; each but ``env.KEY`` is a setting of
`evaluation.settings.EvaluateSettings` (its type, default and rule):

    protocol=noop|human_starts|episodes
                                 noop: 1-30 random no-ops, ε 0.01, 30 episodes per run;
                                 human_starts: one episode per start point, ε 0.001;
                                 episodes: 30 episodes from the env's own reset with the
                                 run's test ε (0.01), raw scores only. Default: noop, or
                                 episodes for env kinds without human reference (MinAtar)
    snapshot=best|latest         which snapshot of a run directory
    episodes=N                   episodes per run (30), or the first N start points
    epsilon=E                    override the protocol's ε (Table 5)
    start_states=PATH            human_starts: a start-state file, or a directory of <rom_id>.npz
    seed=S                       seeds every evaluation env and ε draw (0)
    device=auto|cpu|cuda[:N]     where the network runs (auto)
    cuda_graphs=true|false       on CUDA, act through a captured forward pass once it has
                                 matched the eager one (false: eager, the default)
    output=DIR                   where evaluation_<protocol>.json/.csv go (the evaluated dir)
    bootstrap_reps=N             resamples for the IQM confidence interval (2000)
    env.KEY=V                    override an argument of the run's env factory (make_env for
                                 Atari, make_minatar_env for MinAtar): env.max_episode_frames

It prints a table (per game: raw mean ± std, human-normalized score, the paper's Double DQN
scores; raw scores alone under episodes) and writes it as JSON and CSV. Exit status 2 with one
line on bad input, including a protocol that needs human reference data MinAtar lacks.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import ale_py
import numpy as np

from artifacts.command_line import unwritable_reason
from artifacts.snapshot import load_agent_snapshot, read_snapshot
from envs.registry import environment_kind
from evaluation.arguments import parse_arguments
from evaluation.human_starts.start_state_file import load_start_states
from evaluation.protocol_registry import PROTOCOLS, Protocol
from evaluation.protocols import episode_progress
from evaluation.runs import BARE_SNAPSHOT_ENV, RunSpec, find_snapshots
from evaluation.settings import EvaluateSettings
from reporting.score_table import (
    RunScore,
    format_table,
    game_rows,
    normalizes,
    paper_note,
    report_files,
    summaries,
    table_title,
    write_report,
)
from schema import typed

# About the most a report takes: each run's fields, and each episode's score and start frame
# in the JSON; a protocol that plays each start point once is taken to have the paper's 100.
RUN_REPORT_BYTES, EPISODE_REPORT_BYTES, START_POINTS = 4096, 64, 100


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        path, options = read_command_line(argv)
        run(path, options)
    except (ValueError, ReportNotWritten) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1
    return 0


class ReportNotWritten(RuntimeError):
    """The evaluation ran, and its report could not be written (a disk that filled since)."""


def read_command_line(argv: list[str]) -> tuple[Path, dict]:
    """The path and the options: the checked settings and the ``env`` overrides."""
    positional, values = parse_arguments(argv, {**EvaluateSettings.defaults(), "env": {}})
    if len(positional) != 1:
        raise ValueError("give exactly one path: a snapshot, a run or a multirun directory")
    env = values.pop("env")
    settings = typed(EvaluateSettings, values)
    return Path(positional[0]), {**dataclasses.asdict(settings), "env": env}


def choose_protocol(name: str | None, specs: list[RunSpec]) -> Protocol:
    """The protocol ``name``, refused unless it can evaluate every run's env kind; with no name,
    the first registered one that needs no start_states= and can."""
    kinds = sorted({spec.env_kind for spec in specs})
    if name is None:
        for protocol in PROTOCOLS.values():
            if not protocol.needs_start_states and not _unavailable(protocol, kinds):
                return protocol
        raise ValueError(f"no protocol can evaluate runs of env.kind={'/'.join(kinds)}")
    protocol = PROTOCOLS[name]
    refused = _unavailable(protocol, kinds)
    if refused:
        kind, reason = next(iter(refused.items()))
        available = [p.name for p in PROTOCOLS.values() if not _unavailable(p, [kind])]
        raise ValueError(
            f"protocol {name} is not available for env.kind={kind}: {reason} "
            f"(protocols for it: {', '.join(available)})"
        )
    return protocol


def _unavailable(protocol: Protocol, kinds: list[str]) -> dict[str, str]:
    reasons = {kind: protocol.unavailable_reason(environment_kind(kind)) for kind in kinds}
    return {kind: reason for kind, reason in reasons.items() if reason is not None}


def check_runs(protocol: Protocol, specs: list[RunSpec], options: dict) -> None:
    """The options that depend on the protocol and the runs' env kinds, and snapshots that fit
    their runs (each is read again to play it: they are small)."""
    if protocol.needs_start_states and not options["start_states"]:
        raise ValueError(
            f"protocol={protocol.name} needs start_states=FILE.npz (or a directory of "
            "<rom_id>.npz); make one with python -m evaluation.human_starts sample"
        )
    for kind in sorted({spec.env_kind for spec in specs}):
        typed(environment_kind(kind).settings, options["env"], fixed=("kind",))
    for spec in specs:
        check_snapshot(spec, protocol, options)


def run(path: Path, options: dict) -> None:
    """Evaluate every run under ``path``: all that can be refused is, before the first episode."""
    specs = find_snapshots(path, options["snapshot"])
    protocol = choose_protocol(options["protocol"], specs)
    check_runs(protocol, specs, options)
    output = Path(options["output"] or (path if path.is_dir() else path.parent))
    episodes = options["episodes"] or protocol.budget or START_POINTS
    needed = len(specs) * (RUN_REPORT_BYTES + episodes * EPISODE_REPORT_BYTES)
    reason = unwritable_reason(output, needed)
    if reason is not None:  # found now, not after the whole evaluation
        raise ValueError(f"output={output} cannot be used: {reason}")
    # Every run plays the same stream: its episodes do not depend on which runs the path
    # names beside it, and runs are compared on the same no-op counts and ε draws.
    (stream,) = np.random.SeedSequence(options["seed"]).spawn(1)
    scores, sources = [], set()
    for spec in specs:
        print(f"evaluating {spec.name} ({protocol.name}) ...", file=sys.stderr, flush=True)
        score, source = evaluate_run(spec, protocol, options, np.random.default_rng(stream))
        scores.append(score)
        sources.add(source)
    start_files = sorted(s for s in sources if s)
    header = report_header(protocol, options, specs, start_files, normalizes(protocol, scores))
    rows = game_rows(scores, protocol)
    summary = summaries(
        scores, rows, protocol, reps=options["bootstrap_reps"], seed=options["seed"]
    )
    print(format_table(header, rows, summary))
    try:
        written = write_report(output, protocol, header, scores, rows, summary)
    except OSError as error:
        json_path, csv_path = report_files(output, protocol.name)
        raise ReportNotWritten(
            f"could not write {json_path} and {csv_path.name}: {error.strerror}; neither was "
            "written (make room, or give output= on another disk, and evaluate again)"
        ) from None
    for report in written:
        print(f"wrote {report}")


def check_snapshot(spec: RunSpec, protocol: Protocol, options: dict) -> None:
    """A one-line ValueError unless the snapshot plays the run's game and its env's frames."""
    payload = read_snapshot(spec.snapshot)
    environment = environment_kind(spec.env_kind)
    game = payload["game"]
    env_kwargs = {"game": game, **env_arguments(protocol, spec, options)}
    try:
        same_game = environment.game_id(str(env_kwargs["game"])) == environment.game_id(game)
    except ValueError:  # one of the two is no game of this env kind
        same_game = False
    if not same_game:
        raise ValueError(
            f"{spec.snapshot} is an agent for {game}, but its run config "
            f"says env.game={env_kwargs['game']}"
        )
    # The kind's defaults where the config sets nothing (a snapshot outside a run).
    settings = typed(environment.settings, {**env_kwargs, "kind": spec.env_kind})
    env_shape, agent_shape = tuple(environment.frame_shape(settings)), tuple(payload["frame_shape"])
    if env_shape != agent_shape:
        # A snapshot outside its run directory has no config: it is taken for an Atari agent.
        bare = spec.env_kwargs == BARE_SNAPSHOT_ENV
        hint = " (no run config beside it: evaluate its run directory)" if bare else ""
        raise ValueError(
            f"{spec.snapshot} is an agent for frames of shape {agent_shape}, but "
            f"env.kind={spec.env_kind} gives frames of shape {env_shape}{hint}"
        )


def evaluate_run(
    spec: RunSpec, protocol: Protocol, options: dict, rng: np.random.Generator
) -> tuple[RunScore, str]:
    """One run under ``protocol``; returns its score row and the start-state file."""
    policy, info = load_agent_snapshot(spec.snapshot, options["device"], options["cuda_graphs"])
    env_kwargs = {"game": info.game, **env_arguments(protocol, spec, options)}
    epsilon = epsilon_of(protocol, spec, options)
    starts, source = None, ""
    if protocol.needs_start_states:
        start_file = path = Path(options["start_states"])
        if path.is_dir():  # one holding <rom_id>.npz for each game
            start_file = path / f"{info.game}.npz"
            if not start_file.is_file():
                raise ValueError(f"start_states={path} has no {info.game}.npz for game {info.game}")
        starts, source = load_start_states(start_file, info.game), str(start_file)
    episodes = options["episodes"] or protocol.budget
    total = episodes if starts is None else min(episodes or len(starts), len(starts))
    with episode_progress(total, protocol.unit.split()[-1]):
        result = protocol.evaluate(
            policy, env_kwargs, rng=rng, epsilon=epsilon, episodes=episodes, start_states=starts
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
        normalized=result.summary(info.game, protocol.reference).get("normalized_score"),
        partial=result.partial,
        episode_scores=tuple(result.scores.tolist()),
        start_frames=tuple(result.start_frames.tolist()),
        env_kind=spec.env_kind,
        epsilon=epsilon,
    )
    return score, source


def env_arguments(protocol: Protocol, spec: RunSpec, options: dict) -> dict:
    """A run's env settings: its config's, then the env.KEY overrides, over the protocol's cap."""
    return {"max_episode_frames": protocol.max_episode_frames, **spec.env_kwargs, **options["env"]}


def epsilon_of(protocol: Protocol, spec: RunSpec, options: dict) -> float:
    """epsilon=, else the run's test ε for a protocol that uses it, else the protocol's."""
    if options["epsilon"] is not None:
        return options["epsilon"]
    if protocol.uses_run_epsilon and spec.test_epsilon is not None:
        return spec.test_epsilon
    return protocol.epsilon


def noop_max_of(spec: RunSpec, env: dict) -> int:
    """The most random no-ops the run's env plays at a reset (0 for a kind without them)."""
    default = environment_kind(spec.env_kind).settings.defaults().get("noop_max", 0)
    return env.get("noop_max", default)


def report_header(
    protocol: Protocol,
    options: dict,
    specs: list[RunSpec],
    start_files: list[str],
    normalized: bool,
) -> dict:
    epsilons = sorted({epsilon_of(protocol, spec, options) for spec in specs})
    used = [env_arguments(protocol, spec, options) for spec in specs]  # what the env got
    noop_max = sorted({noop_max_of(spec, env) for spec, env in zip(specs, used, strict=True)})
    caps = sorted({env["max_episode_frames"] for env in used})
    return {
        "title": table_title(protocol, noop_max, epsilons, caps, options["episodes"]),
        "normalized": normalized,
        "paper_note": paper_note(protocol) if normalized else None,
        "protocol": protocol.name,
        "epsilon": epsilons[0] if len(epsilons) == 1 else epsilons,
        "env_kinds": sorted({spec.env_kind for spec in specs}),
        "snapshot": options["snapshot"],
        "seed": options["seed"],
        "env_overrides": options["env"],
        "start_states": start_files,
        "ale_py_version": ale_py.__version__,
    }


if __name__ == "__main__":
    sys.exit(main())
