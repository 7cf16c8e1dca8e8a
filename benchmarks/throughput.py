"""End-to-end agent steps/s of the real training loop, and where the time of a step goes.

    python benchmarks/throughput.py replay=proportional --steps 4000
    python benchmarks/throughput.py replay=uniform agent.device=cuda replay.capacity=1000000
    python benchmarks/throughput.py experiment=minatar_dqn replay=proportional threads=1

The run is built as train.py builds it; `--steps` steps of `Training.run` from `--warmup` steps
past learning start are timed by wrapping the components' methods (COMPONENTS), bookkeeping is
the rest. On CUDA "waiting for the update" is the time the host was blocked on it; the action
chosen right behind an update waits for it too, so part of that wait shows in the act row.
"""

import contextlib
import dataclasses
import gc
import json
import os
import signal
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from common import command_line, load_averages, markdown, timed
from run_config import configure, device_description
from torch import nn
from torch.utils.tensorboard import SummaryWriter

import agents.networks as networks
import agents.updates as updates
import evaluation.protocols as protocols
from artifacts.run_directory import RunDirectory
from train import build
from training.checkpoints import CheckpointStore
from training.loop import Training
from training.periodic_test import PeriodicTest
from training.run_record import RunRecord

COMPONENTS = (  # (row, part of Components, its methods timed)
    ("env", "env", ("step", "reset", "noops_after_life_loss")),
    ("act", "policy", ("act",)),
    ("replay add", "replay", ("add", "start_episode")),
    ("learn: replay.sample", "replay", ("sample",)),
    ("learn: agent.start_learning", "agent", ("start_learning",)),
    ("learn: waiting for the update", "pending", ("result",)),
    ("learn: update_priorities", "replay", ("update_priorities",)),
)
LEARN_ROWS = tuple(row for row, _, _ in COMPONENTS if row.startswith("learn: "))
AGENT_ROWS = ("learn: agent.start_learning", "learn: waiting for the update")
RATES = {
    "steps_per_second": "agent steps/s",
    "steps_per_second_without_test": "agent steps/s without the test",
    "frames_per_second": "frames/s",
    "updates_per_second": "updates/s",
    "ms_per_update": "ms per update (start + wait)",
    "cpu_per_wall": "process CPU s per wall s",
}


class TrivialQNetwork(nn.Module):
    """A Q-network's interface (uint8 states in, Q values out) with almost no arithmetic: a
    linear map of at most 7 x 7 points of each frame channel (every 12th pixel of an Atari
    frame), for the loop's ceiling."""

    def __init__(self, num_actions: int, history_length: int, frame_shape: tuple) -> None:
        super().__init__()
        self.stride = max(1, frame_shape[-1] // 7)
        points = int(np.prod(frame_shape[:-2])) * len(range(0, frame_shape[-1], self.stride)) ** 2
        self.head = nn.Linear(history_length * points, num_actions)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        sampled = frames[..., :: self.stride, :: self.stride]
        return self.head(sampled.flatten(1).float().div_(255.0))


class Meter:
    """The seconds of each call per row inside the timed window. It also stands in for the loop's
    StopRequest: the loop reads `signal` once before every step, which is where the window
    opens after the warm-up and where the run stops after the window."""

    def __init__(self, first: int, last: int, sync: torch.device | None):
        self.first, self.last = first, last
        self.synchronize = (lambda: torch.cuda.synchronize(sync)) if sync else lambda: None
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.training: Training | None = None
        self.counting, self.opened, self.closed = False, None, None

    @property
    def signal(self) -> int | None:
        step = self.training.step
        if step == self.first and self.opened is None:
            self.counting, self.opened = True, (time.perf_counter(), time.process_time())
        elif step >= self.last and self.closed is None:
            self.counting, self.closed = False, (time.perf_counter(), time.process_time())
        return None if self.closed is None else signal.SIGTERM

    def wrap(self, owner, name: str, row: str) -> None:
        original = getattr(owner, name)

        def metered(*args, **kwargs):
            if not self.counting:
                return original(*args, **kwargs)
            self.synchronize()
            start = time.perf_counter()
            result = original(*args, **kwargs)
            self.synchronize()
            self.seconds[row].append(time.perf_counter() - start)
            return result

        setattr(owner, name, metered)


def prefill(replay, count: int, num_actions: int) -> None:
    """Fill the memory through its own add path, so that the window samples from a full
    memory as a long run does; the frames' content changes no cost."""
    shape = replay.storage.frame_shape
    levels = 256 if len(shape) == 2 else 2  # grey levels, or MinAtar's binary channels
    frames = np.random.default_rng(0).integers(0, levels, (8, *shape), dtype=np.uint8)
    for index in range(count):
        if index % 1000 == 0:  # episodes of 1000 steps, each leaving a few slots unsampleable
            replay.start_episode(frames[0])
        else:
            replay.add(index % num_actions, 0.0, False, frames[index % 8])


def instrument(training: Training, meter: Meter) -> None:
    for row, part, methods in COMPONENTS:
        owners = {"pending": updates.PendingLearn, "policy": training.parts.agent.policy}
        owner = owners[part] if part in owners else getattr(training.parts, part)
        for method in methods:
            meter.wrap(owner, method, row)
    training.save_checkpoint = lambda: None  # the run's stop would write one
    training.periodic_test.stop_requested = lambda: False  # only the loop may read the window


def scaled_test_us(training: Training, frames: int) -> float:
    """µs per training step of the periodic test at the config's cadence, from one test of
    `frames` frames: playing scales with the frames; making the env, the resets and the
    snapshots are paid once a test. In the worker, what the training process pays: saving the
    agent for it (its start is paid once a run, so the second request is timed)."""
    full_frames = training.cfg.evaluation.frames
    evaluation = dataclasses.replace(training.cfg.evaluation, frames=min(frames, full_frames))
    cfg = dataclasses.replace(training.cfg, evaluation=evaluation)
    test = PeriodicTest(cfg, training.run_dir, np.random.default_rng(0))
    played, agent = [], training.parts.agent
    writer = SummaryWriter(str(training.run_dir / "benchmark_test"))
    with (
        mock.patch.object(protocols, "_play", timed(protocols._play, played.append)),
        contextlib.closing(writer),
        contextlib.closing(test),
    ):
        if test.in_worker:
            test.request(agent, test.period_steps, writer)
            start = time.perf_counter()
            test.request(agent, 2 * test.period_steps, writer)
            return (time.perf_counter() - start) / test.period_steps * 1e6
        start = time.perf_counter()
        test.run(agent, training.step, writer)
        total = time.perf_counter() - start
    per_test = sum(played) * full_frames / cfg.evaluation.frames + total - sum(played)
    return per_test / test.period_steps * 1e6


def figures(meter: Meter, steps: int, test_us: float) -> dict:
    seconds, cpu_seconds = (meter.closed[clock] - meter.opened[clock] for clock in (0, 1))
    rows = {row: sum(meter.seconds[row]) / steps * 1e6 for row, _, _ in COMPONENTS}
    loop_us = seconds / steps * 1e6
    rows["bookkeeping"] = loop_us - sum(rows.values())
    rows["evaluation"] = test_us
    updates = len(meter.seconds["learn: agent.start_learning"])
    agent_seconds = sum(sum(meter.seconds[row]) for row in AGENT_ROWS)
    return {
        "us_per_step": rows,
        "total_us_per_step": loop_us + test_us,
        "steps_per_second": 1e6 / (loop_us + test_us),
        "steps_per_second_without_test": 1e6 / loop_us,
        "frames_per_second": 1e6 / (loop_us + test_us) * meter.training.cfg.env.frame_skip,
        "updates_per_second": updates / seconds,
        "ms_per_update": 1e3 * agent_seconds / max(updates, 1),
        # Below 1 with one torch thread: the process waited for a core (a busy machine).
        "cpu_per_wall": cpu_seconds / seconds,
    }


def measure(cfg, args, network: type[nn.Module]) -> dict:
    """One pass of the real loop with `network` in place of the configured one."""
    gc.collect()  # the last pass's memory is held by reference cycles (wrappers, the meter)
    with (
        tempfile.TemporaryDirectory(prefix="throughput_") as directory,
        mock.patch.object(networks, "NETWORKS", {**networks.NETWORKS, cfg.agent.network: network}),
    ):
        run_dir, parts = Path(directory), build(cfg)
        with contextlib.closing(parts.env):
            prefill(parts.replay, cfg.replay.capacity, parts.agent.num_actions)
            cuda = parts.agent.device if parts.agent.device.type == "cuda" else None
            first = cfg.train.learning_start_steps + args.warmup
            meter = Meter(first, first + args.steps, cuda if args.sync else None)
            checkpoints = CheckpointStore(RunDirectory(run_dir).checkpoints, cfg.checkpoint.keep)
            record = RunRecord(run_dir, dataclasses.asdict(cfg))
            training = meter.training = Training(parts, cfg, run_dir, checkpoints, meter, record)
            instrument(training, meter)
            training.start(None)
            training.run()
            return figures(meter, args.steps, scaled_test_us(training, args.eval_frames))


def check_window(cfg, args) -> None:
    """The window (`args.warmup` steps past learning start, then `args.steps`) must lie before
    the end of the run and between two tests."""
    if args.warmup < 0:
        raise ValueError(f"--warmup {args.warmup}: allowed is 0 or more")
    steps, first = args.steps, cfg.train.learning_start_steps + args.warmup
    last, period = first + steps, cfg.evaluation.every_frames // cfg.env.frame_skip
    if steps < 1 or last >= cfg.train.total_steps:
        raise ValueError(
            f"the window (steps {first + 1:,} to {last:,}) must end before "
            f"train.total_steps={cfg.train.total_steps:,}"
        )
    if last // period > first // period:
        raise ValueError(f"a periodic test (every {period:,} steps) falls in the window")


def header(cfg, args, overrides: list[str], loads: list) -> str:
    reduced = "" if cfg.replay.capacity >= 1_000_000 else " (reduced: the paper's is 1,000,000)"
    return (
        f"device {device_description(cfg)}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), --sync {'on' if args.sync else 'off'}; "
        f"load average {load_averages(loads)}\n"
        f"overrides: {' '.join(overrides)}\n"
        f"{args.steps:,} agent steps timed after {cfg.train.learning_start_steps + args.warmup:,} "
        f"(learning from step {cfg.train.learning_start_steps:,}); replay "
        f"{cfg.replay.capacity:,} transitions{reduced}, prefilled; no checkpoints\n"
        f"evaluation: one {args.eval_frames:,}-frame test, scaled to {cfg.evaluation.frames:,} "
        f"frames per {cfg.evaluation.every_frames:,} training frames\n"
    )


def tables(passes: dict) -> str:
    body = []
    for row in ("env", "act", "replay add", "learn", *LEARN_ROWS, "bookkeeping", "evaluation"):
        cells = [row.replace("learn: ", "↳ ")]
        for result in passes.values():
            rows = result["us_per_step"]
            value = sum(rows[r] for r in LEARN_ROWS) if row == "learn" else rows[row]
            cells += [f"{value:,.0f}", f"{100 * value / result['total_us_per_step']:.1f} %"]
        body.append(cells)
    totals = (f"{r['total_us_per_step']:,.0f}" for r in passes.values())
    body.append(["total"] + [cell for total in totals for cell in (total, "100 %")])
    head = ["component"] + [f"{name} {unit}" for name in passes for unit in ("µs/step", "share")]
    rates = [
        [label] + [f"{r[key]:,.{2 if r[key] < 10 else 1}f}" for r in passes.values()]
        for key, label in RATES.items()
    ]
    return markdown(head, body) + "\n\n" + markdown(["rate", *passes], rates)


def main() -> None:
    parser = command_line(__doc__, overrides="Hydra overrides, as for train.py")
    parser.add_argument("--steps", type=int, default=4000, help="agent steps timed")
    parser.add_argument("--warmup", type=int, default=500, help="steps past learning start first")
    parser.add_argument("--eval-frames", type=int, default=20_000, help="frames of the scaled test")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the trivial network")
    parser.add_argument("--sync", action="store_true", help="synchronize CUDA around calls")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also save the figures")
    args = parser.parse_intermixed_args()
    cfg, overrides = configure(args.overrides, lambda cfg: check_window(cfg, args))
    loads = [os.getloadavg()]
    candidates = {cfg.agent.network: networks.NETWORKS[cfg.agent.network]}
    candidates |= {} if args.no_ceiling else {"trivial network": TrivialQNetwork}
    passes = {name: measure(cfg, args, network) for name, network in candidates.items()}
    loads.append(os.getloadavg())
    print(header(cfg, args, overrides, loads) + "\n" + tables(passes))
    if args.json:
        record = {"device": device_description(cfg), "overrides": overrides, "load": loads}
        record |= {"args": vars(args), "passes": passes}
        args.json.write_text(json.dumps(record, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
