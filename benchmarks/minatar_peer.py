"""Frames/s of this project's MinAtar DQN beside MinAtar's own `examples/dqn.py`, one thread
each, in alternating pairs of fresh processes on the same machine.

    python benchmarks/minatar_peer.py --peer ~/MinAtar/examples/dqn.py --pairs 3

The peer ships in MinAtar's repository, not its package: give a checkout's file. It runs as
written but for ε (docs/benchmarks.md) and stops after its window: --frames updates (one a
frame) after --warmup. This project's side is `benchmarks/throughput.py experiment=minatar_dqn
threads=1 --no-ceiling` with the overrides given (replay=proportional unless one is).
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, THROUGHPUT, command_line, markdown

GAME = "breakout"  # configs/env/minatar.yaml's default


class WindowDone(Exception):
    """The peer's timed window has ended; its run stops here."""


def peer_frames_per_second(peer: Path, frames: int, warmup: int) -> float:
    """Runs the peer's `dqn` in this process until `warmup + frames` updates, and returns the
    frames per second between its `warmup`-th update and its last."""
    import torch
    from minatar import Environment

    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("minatar_peer_dqn", peer)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.FIRST_N_FRAMES = 1  # ε is 0.1 from the first learning frame on
    train, calls, opened = module.train, [0], [0.0]

    def timed_train(*args):
        train(*args)
        calls[0] += 1
        if calls[0] == warmup:
            opened[0] = time.perf_counter()
        if calls[0] == warmup + frames:
            raise WindowDone

    module.train = timed_train
    with tempfile.TemporaryDirectory(prefix="minatar_peer_") as directory:
        try:
            module.dqn(Environment(GAME), False, False, str(Path(directory) / GAME))
        except WindowDone:
            return frames / (time.perf_counter() - opened[0])
    raise RuntimeError(f"the peer ended before {warmup + frames} updates")


def ours_frames_per_second(overrides: list[str], frames: int) -> float:
    with tempfile.TemporaryDirectory(prefix="minatar_peer_") as directory:
        figures = Path(directory) / "figures.json"
        command = [sys.executable, str(THROUGHPUT), "experiment=minatar_dqn", "threads=1"]
        command += [*overrides, f"--steps={frames}", "--no-ceiling", f"--json={figures}"]
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
        (figures_of_pass,) = json.loads(figures.read_text())["passes"].values()
        return figures_of_pass["frames_per_second"]


def peer_in_child(args) -> float:
    window = [f"--peer={args.peer}", f"--frames={args.frames}", f"--warmup={args.warmup}"]
    command = [sys.executable, __file__, *window, "--peer-only"]
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=environment)
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = command_line(__doc__, overrides="Hydra overrides for this project's run")
    parser.add_argument("--peer", type=Path, required=True, help="MinAtar's examples/dqn.py")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs, alternated")
    parser.add_argument("--frames", type=int, default=5000, help="frames timed per run")
    parser.add_argument("--warmup", type=int, default=500, help="peer's updates before them")
    parser.add_argument("--peer-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.peer.is_file():
        parser.error(f"--peer {args.peer} is no file: give MinAtar's examples/dqn.py")
    if min(args.pairs, args.frames, args.warmup) < 1:
        parser.error("--pairs, --frames and --warmup must be positive")
    if args.peer_only:
        print(peer_frames_per_second(args.peer, args.frames, args.warmup))
        return
    overrides = args.overrides
    if not any(override.startswith("replay=") for override in overrides):
        overrides = ["replay=proportional", *overrides]
    rows, loads = [], [os.getloadavg()]
    for pair in range(1, args.pairs + 1):
        ours, peer = ours_frames_per_second(overrides, args.frames), peer_in_child(args)
        rows.append([str(pair), f"{ours:,.1f}", f"{peer:,.1f}", f"{ours / peer:.2f}×"])
        print(f"pair {pair}: {ours:,.1f} against {peer:,.1f} frames/s", flush=True)
    loads.append(os.getloadavg())
    print(
        f"\n{os.cpu_count()} CPU cores; load average {loads[0][0]:.2f} before, "
        f"{loads[1][0]:.2f} after; ours: {' '.join(overrides)}; {args.frames:,} frames each\n"
    )
    head = ["pair", "ours, frames/s", "examples/dqn.py, frames/s", "ratio"]
    print(markdown(head, rows))


if __name__ == "__main__":
    main()
