"""Every GPU figure the throughput goals name, in pieces that each fit a short lease, and one
table merged from the saved pieces.

    python benchmarks/gpu_figures.py --out gpu_figures                  # every piece, in turn
    python benchmarks/gpu_figures.py --out lease2 --only concurrent --set agent.cuda_graphs=true
    python benchmarks/gpu_figures.py --table gpu_figures lease2         # one table of all pieces
    python benchmarks/gpu_figures.py --out /tmp/dry --device cpu --capacity 20000 --steps 300 \\
        --only exact concurrent --concurrent 2                          # a dry run without a GPU

A piece is one of CONFIGURATIONS (the paper's config with one thing changed), measured by one
benchmarks/throughput.py process, or `concurrent`: K runs of `exact` at once on the GPU, as
`hydra/launcher=shared_gpu` runs a sweep (docs/gpu.md). The replay share is replay add +
sample + update_priorities over the whole step; prioritized over uniform compares those rows
of `exact` and `uniform`, not the totals, which differ by all else two processes do.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import THROUGHPUT, command_line, markdown

CONFIGURATIONS = {  # name: (what changes from the paper's config, overrides)
    "exact": ("the paper's config", []),
    "uniform": ("uniform replay", ["replay=uniform"]),
    "replay_on_device": ("frames on the GPU", ["replay.device={device}"]),
    "pipelined": ("pipelined", ["agent.pipelined=true"]),
    "pipelined_replay_on_device": (
        "pipelined, frames on the GPU",
        ["agent.pipelined=true", "replay.device={device}"],
    ),
}
CONCURRENT = "concurrent"
PIECES = (*CONFIGURATIONS, CONCURRENT)
REPLAY_ROWS = ("replay add", "learn: replay.sample", "learn: update_priorities")
NETWORK = "nature"  # the pass of benchmarks/throughput.py with the configured network


def overrides_of(args, name: str, seed: int) -> list[str]:
    """The Hydra overrides of one run: the paper's config, the configuration's change, then
    `--set`, each key once (a later value of a key replaces an earlier one)."""
    _, changes = CONFIGURATIONS[name]
    overrides = [
        "replay=proportional",
        f"agent.device={args.device}",
        f"replay.capacity={args.capacity}",
        f"seed={seed}",
        *(change.format(device=args.device) for change in changes),
        *args.set,
    ]
    by_key = {override.split("=", 1)[0]: override for override in overrides}
    return list(by_key.values())


def run_together(commands: list[list[str]], logs: list[Path], seconds: float, env) -> list | None:
    """Each command's exit status, run at once, each in its own session, its output in its log;
    past `seconds` every one is killed with what it started, and None returned."""
    deadline, running = time.monotonic() + seconds, []
    for command, log in zip(commands, logs, strict=True):
        with log.open("w") as output:
            process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        running.append(process)
    try:
        return [process.wait(timeout=max(0.0, deadline - time.monotonic())) for process in running]
    except subprocess.TimeoutExpired:
        for process in running:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return None


def run_piece(args, name: str) -> dict:
    """One piece, measured now: its record, as saved in DIR/PIECE.json."""
    concurrent = name == CONCURRENT
    count = args.concurrent if concurrent else 1
    threads = str(max(1, (os.cpu_count() or 1) // count))
    env = dict(os.environ, OMP_NUM_THREADS=threads) if concurrent else None
    configuration = "exact" if concurrent else name
    flags = [f"--steps={args.steps}", *([] if name == "exact" else ["--no-ceiling"])]
    started, runs = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="gpu_figures_") as directory:
        figures = [Path(directory) / f"{seed}.json" for seed in range(count)]
        logs = [path.with_suffix(".log") for path in figures]
        commands = [
            [sys.executable, str(THROUGHPUT), *overrides_of(args, configuration, seed)]
            + [*flags, f"--json={path}"]
            for seed, path in enumerate(figures)
        ]
        statuses = run_together(commands, logs, args.piece_seconds, env)
        if statuses is None:
            raise SystemExit(
                f"error: piece {name} ran past --piece-seconds={args.piece_seconds:g} and was "
                "stopped; give fewer --steps or a smaller --capacity"
            )
        for index, (status, log, path) in enumerate(zip(statuses, logs, figures, strict=True)):
            output = log.read_text()
            if status:
                # The whole output: a failing run's last line is often the exit's noise.
                print(output, file=sys.stderr)
                raise SystemExit(
                    f"error: piece {name} failed: run {index} exited with status {status}, "
                    "its output is above"
                )
            runs.append(
                {"status": status, "output": output, "figures": json.loads(path.read_text())}
            )
    return {
        "piece": name,
        "description": f"{count} runs of exact at once" if concurrent else CONFIGURATIONS[name][0],
        "set": args.set,
        "commands": [" ".join(command[1:]) for command in commands],
        "seconds": round(time.monotonic() - started, 1),
        "runs": runs,
    }


def measure(args) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or PIECES:
        if name == CONCURRENT and not args.concurrent:
            continue
        print(f"\n## {name}", flush=True)
        record = run_piece(args, name)
        for run in record["runs"]:
            print(run["output"], flush=True)
        (args.out / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        print(f"{name}: {record['seconds']:.0f} s, saved in {args.out / f'{name}.json'}")


Key = tuple[str, tuple[str, ...]]  # a saved piece: its name and its --set overrides


def saved_pieces(sources: list[Path]) -> dict[Key, dict]:
    """The pieces saved in `sources` (folders of PIECE.json, or such files), by name and
    overrides; where a piece was saved twice with the same overrides, the later source's."""
    records = []
    for source in sources:
        files = sorted(source.glob("*.json")) if source.is_dir() else [source]
        records += [json.loads(path.read_text()) for path in files]
    pieces = (record for record in records if record.get("piece") in PIECES)
    return {(record["piece"], tuple(record["set"])): record for record in pieces}


def passes(record: dict) -> list[dict]:
    """The configured network's figures of each run of a piece."""
    return [run["figures"]["passes"][NETWORK] for run in record["runs"]]


def replay_us(figures: dict) -> float:
    """µs per agent step in the replay's rows."""
    return sum(figures["us_per_step"][row] for row in REPLAY_ROWS)


def with_overrides(text: str, overrides: tuple[str, ...]) -> str:
    return f"{text} (--set {' '.join(overrides)})" if overrides else text


def table(pieces: dict[Key, dict]) -> str:
    """The markdown table of the saved pieces, each configuration's rows together (the one
    without overrides first), and notes on where they ran."""
    body = []
    for name, overrides in sorted(pieces, key=lambda key: (PIECES.index(key[0]), key[1])):
        runs = passes(pieces[name, overrides])
        if name == CONCURRENT:
            rates = [figures["steps_per_second"] for figures in runs]
            each = f"{statistics.median(rates):,.0f} (min {min(rates):,.0f}, max "
            each += f"{max(rates):,.0f}; together {sum(rates):,.0f})"
            runs_at_once = with_overrides(f"{len(rates)} runs at once, each", overrides)
            body.append([runs_at_once, each, "", "", ""])
            continue
        (figures,) = runs
        rates = (figures[key] for key in ("steps_per_second", "steps_per_second_without_test"))
        share = replay_us(figures) / figures["total_us_per_step"]
        cells = [with_overrides(CONFIGURATIONS[name][0], overrides), *map("{:,.0f}".format, rates)]
        body.append([*cells, f"{figures['ms_per_update']:.2f}", f"{100 * share:.1f} %"])
    head = ["configuration", "agent steps/s", "without the test", "ms per update"]
    devices = {run["figures"]["device"] for record in pieces.values() for run in record["runs"]}
    notes = [f"device: {', '.join(sorted(devices))}"]
    for overrides in sorted({overrides for _, overrides in pieces}):
        if ("exact", overrides) in pieces and ("uniform", overrides) in pieces:
            exact, uniform = (passes(pieces[name, overrides])[0] for name in ("exact", "uniform"))
            prioritized, plain = replay_us(exact), replay_us(uniform)
            overhead = (prioritized - plain) / exact["total_us_per_step"]
            comparison = with_overrides("prioritized (proportional) over uniform", overrides)
            notes.append(
                f"{comparison}: the replay's rows take {prioritized:,.0f} against {plain:,.0f} "
                f"µs per agent step, {100 * overhead:+.1f} % of a prioritized step"
            )
    return markdown([*head, "replay share"], body) + "\n\n" + "\n".join(notes)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = command_line(__doc__)
    task = parser.add_mutually_exclusive_group(required=True)
    task.add_argument("--out", type=Path, help="folder for the pieces measured now")
    task.add_argument("--table", type=Path, nargs="+", metavar="SOURCE", help="saved pieces")
    parser.add_argument("--only", nargs="+", choices=PIECES, help="these pieces alone")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--concurrent", type=int, default=8, help="runs at once; 0: no piece")
    parser.add_argument("--piece-seconds", type=float, default=480, help="a piece's limit")
    parser.add_argument("--device", default="cuda", help="agent.device (cpu: a dry run)")
    parser.add_argument("--capacity", type=int, default=1_000_000, help="replay.capacity")
    parser.add_argument("--steps", type=int, default=20_000, help="agent steps timed per run")
    args = parser.parse_args(argv)
    if args.concurrent < 0:
        parser.error(f"--concurrent must be >= 0, got {args.concurrent}")
    if any("=" not in override for override in args.set):
        parser.error("--set takes KEY=VALUE")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.out is not None:
        measure(args)
    print("\n" + table(saved_pieces(args.table or [args.out])))


if __name__ == "__main__":
    main()
