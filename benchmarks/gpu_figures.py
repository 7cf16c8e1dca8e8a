"""Every GPU figure the README's throughput targets name, from one command: one
benchmarks/throughput.py process per configuration, then K runs of the paper's config at once on
the same GPU, and one table.

    python benchmarks/gpu_figures.py --out gpu_figures                # everything
    python benchmarks/gpu_figures.py --out gpu_figures --only exact uniform --concurrent 0
    python benchmarks/gpu_figures.py --table gpu_figures              # the table from saved runs
    python benchmarks/gpu_figures.py --out /tmp/dry --device cpu --capacity 20000 --steps 300 \\
        --concurrent 2                                                # a dry run without a GPU

Each configuration is the paper's (proportional replay, a 1M-transition memory, the periodic
test in the evaluation worker) with one thing changed; CONFIGURATIONS says what. Configurations
run one after another, each in its own process, so that they never share the GPU; the K
concurrent runs are the `exact` configuration with seeds 0..K-1 and OMP_NUM_THREADS = cores // K
each, as `hydra/launcher=shared_gpu` runs a sweep. `--out` keeps every run's printed tables
(NAME.txt) and figures (NAME.json). The table's replay share is replay add + sample +
update_priorities over the whole step; prioritized over uniform compares `exact` with `uniform`.
Prints figures; asserts nothing.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT = ROOT / "benchmarks" / "throughput.py"
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
REPLAY_ROWS = ("replay add", "learn: replay.sample", "learn: update_priorities")
NETWORK = "nature"  # the pass of benchmarks/throughput.py with the configured network


def throughput_command(args, name: str, seed: int, ceiling: bool) -> list[str]:
    _, changes = CONFIGURATIONS[name]
    overrides = [
        "replay=proportional",
        f"agent.device={args.device}",
        f"replay.capacity={args.capacity}",
        f"seed={seed}",
        *(change.format(device=args.device) for change in changes),
    ]
    flags = [f"--steps={args.steps}", *([] if ceiling else ["--no-ceiling"])]
    return [sys.executable, str(THROUGHPUT), *overrides, *flags]


def run_configuration(args, name: str) -> None:
    """One configuration alone; its tables go to the terminal and to NAME.txt."""
    ceiling = name == "exact"  # the loop's bound with a trivial network, once
    command = throughput_command(args, name, 0, ceiling) + [f"--json={args.out / f'{name}.json'}"]
    print(f"\n## {name}: {' '.join(command[1:])}", flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    (args.out / f"{name}.txt").write_text(result.stdout + result.stderr)
    print(result.stdout + result.stderr, flush=True)
    if result.returncode:
        raise SystemExit(f"error: {name} failed with exit code {result.returncode}")


def run_concurrent(args) -> None:
    """K processes of the `exact` configuration at once, each with its share of the cores."""
    count = args.concurrent
    threads = max(1, (os.cpu_count() or 1) // count)
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    print(f"\n## {count} concurrent runs of `exact`, OMP_NUM_THREADS={threads}", flush=True)
    for old in args.out.glob("concurrent_*"):  # a smaller K's runs must not join the table
        old.unlink()
    running = []
    for seed in range(count):
        name = f"concurrent_{seed}"
        command = throughput_command(args, "exact", seed, ceiling=False)
        command.append(f"--json={args.out / f'{name}.json'}")
        log = (args.out / f"{name}.txt").open("w")
        running.append((name, subprocess.Popen(command, stdout=log, stderr=log, env=environment)))
    failed = [name for name, process in running if process.wait()]
    if failed:
        raise SystemExit(f"error: {', '.join(failed)} failed (see their .txt in {args.out})")


def load(path: Path) -> dict:
    record = json.loads(path.read_text())
    return record["passes"][NETWORK] | {"device": record.get("device", "?")}


def replay_share(figures: dict) -> float:
    rows = figures["us_per_step"]
    return sum(rows[row] for row in REPLAY_ROWS) / figures["total_us_per_step"]


def table(directory: Path) -> str:
    """The markdown table of every run saved in `directory`."""
    saved = {name: directory / f"{name}.json" for name in CONFIGURATIONS}
    runs = {name: load(path) for name, path in saved.items() if path.exists()}
    lines = [
        "| configuration | agent steps/s | without the test | ms per update | replay share |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, figures in runs.items():
        lines.append(
            f"| {CONFIGURATIONS[name][0]} | {figures['steps_per_second']:,.0f} | "
            f"{figures['steps_per_second_without_test']:,.0f} | {figures['ms_per_update']:.2f} | "
            f"{100 * replay_share(figures):.1f} % |"
        )
    concurrent = sorted(directory.glob("concurrent_*.json"))
    if concurrent:
        rates = [load(path)["steps_per_second"] for path in concurrent]
        lines.append(
            f"| {len(rates)} runs at once, each | {statistics.median(rates):,.0f} "
            f"(min {min(rates):,.0f}, max {max(rates):,.0f}; together {sum(rates):,.0f}) | | | |"
        )
    devices = {figures["device"] for figures in runs.values()}
    notes = [f"device: {', '.join(sorted(devices))}"]
    if {"exact", "uniform"} <= runs.keys():
        overhead = runs["uniform"]["steps_per_second"] / runs["exact"]["steps_per_second"] - 1
        notes.append(f"prioritized (proportional) over uniform: {100 * overhead:+.1f} % per step")
    return "\n".join(lines) + "\n\n" + "\n".join(notes)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="folder for each run's tables and figures")
    parser.add_argument("--table", type=Path, metavar="DIR", help="only print DIR's table")
    parser.add_argument("--only", nargs="+", choices=list(CONFIGURATIONS), help="these alone")
    parser.add_argument("--concurrent", type=int, default=8, help="runs at once; 0: none")
    parser.add_argument("--device", default="cuda", help="agent.device (cpu: a dry run)")
    parser.add_argument("--capacity", type=int, default=1_000_000, help="replay.capacity")
    parser.add_argument("--steps", type=int, default=20_000, help="agent steps timed per run")
    args = parser.parse_args()
    if (args.table is None) == (args.out is None):
        parser.error("give either --out (measure) or --table (print saved figures)")
    if args.concurrent < 0:
        parser.error(f"--concurrent must be >= 0, got {args.concurrent}")
    return args


def main() -> None:
    args = parse_args()
    if args.table is None:
        args.out.mkdir(parents=True, exist_ok=True)
        for name in args.only or CONFIGURATIONS:
            run_configuration(args, name)
        if args.concurrent:
            run_concurrent(args)
    print("\n" + table(args.table or args.out))


if __name__ == "__main__":
    main()
