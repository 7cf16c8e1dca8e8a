"""Replay memory per stored transition, batch costs and the prioritized overhead of a step.

    python benchmarks/replay_memory.py                    # N = 2^20 frames (~7.4 GB per kind)
    python benchmarks/replay_memory.py --capacity 100000  # a quicker look
    python benchmarks/replay_memory.py --capacity 50000 --eviction lowest_priority
    python benchmarks/replay_memory.py --kinds proportional --steps 0 --parts
    python benchmarks/replay_memory.py --samplers-alone   # no frames: [--repeats 7]

Per sampler kind, on N random Atari-sized transitions in the storage `--eviction` picks:
resident bytes per transition beside what the config check counts; µs to gather a fresh
batch's states into a reused and into a fresh array; µs of `replay.sample` with
`update_priorities`; ms of a training step (sample, `agent.learn`, `update_priorities`; `--steps
0`: not measured). Medians; compare ratios from one run.

`--samplers-alone` times the samplers without a memory, filled with the paper's priorities of
random TD errors: `sample(32)`, the importance weights (normalized by the batch's maximum or
the buffer's) and `update(32)` as the replay runs them, µs per batch by wall clock and CPU time
(waiting for a core shows in the wall clock only), then each phase's median.
"""

import contextlib
import dataclasses
import os
import time
from types import SimpleNamespace
from unittest import mock

import numpy as np
from common import command_line, markdown, median_us, row, timed

import replay.buffer as buffer_module
from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from artifacts.command_line import PROC, kernel_bytes
from replay.buffer import ReplayBuffer, memory_bytes
from replay.priorities import importance_weights
from replay.priority_signals import PrioritySignal, td_error_priorities
from replay.registry import SAMPLERS, STORAGES, build_storage

EPISODE_STEPS = 1000
HISTORY_LENGTH = 4
BATCH_SIZE, EXPONENT, EPSILON = 32, 0.5, 0.01  # the paper's
RESIDENT = PROC / "self/status"  # its VmRSS: this process's resident memory now
ALONE = ("batch wall", "batch cpu", "buffer wall", "buffer cpu", "sample", "weights", "update")


def filled_replay(kind: str, eviction: str, size: int, rng: np.random.Generator) -> ReplayBuffer:
    """Random frames in episodes of 1000 steps, written through the storage's own API."""
    storage = build_storage(eviction, size, HISTORY_LENGTH, (84, 84))
    replay = ReplayBuffer(storage, SAMPLERS[kind](size, rng), batch_size=32, td_error_clip=1.0)
    frames = rng.integers(0, 256, size=(97, 84, 84), dtype=np.uint8)
    for step in range(size):
        if step % EPISODE_STEPS == 0:
            replay.start_episode(frames[step % 97])
        else:
            replay.add(step % 4, 0.0, False, frames[step % 97])
    return replay


def warm_up(kind: str, eviction: str, rng: np.random.Generator) -> None:
    """Loads the compiled kernels a replay of this kind uses (tens of MB, once per process),
    so that the bytes measured next are the memory's own."""
    replay = filled_replay(kind, eviction, 2 * EPISODE_STEPS, rng)
    for _ in range(2):
        batch = replay.sample(0.5)
        replay.update_priorities(batch.indices, SimpleNamespace(td_errors=batch.rewards))
        replay.add(0, 0.0, False, np.zeros((84, 84), dtype=np.uint8))


def measure(kind: str, args, agent: DoubleDQN, rng: np.random.Generator) -> dict[str, float]:
    warm_up(kind, args.eviction, rng)
    before = kernel_bytes(RESIDENT, "VmRSS")
    replay = filled_replay(kind, args.eviction, args.capacity, rng)
    figures = {"bytes": (kernel_bytes(RESIDENT, "VmRSS") - before) / len(replay)}
    frames_per_slot = type(replay.storage).frames_per_slot(HISTORY_LENGTH)
    figures["checked"] = memory_bytes(1, (84, 84), frames_per_slot)
    batches = iter([replay.sampler.sample(32)[0] for _ in range(4000)])
    out = np.empty((64, HISTORY_LENGTH, 84, 84), dtype=np.uint8)
    gather = replay.storage.gather_transitions
    figures["gather_reused"] = median_us(lambda: gather(next(batches), out), 2000)
    figures["gather_fresh"] = median_us(lambda: gather(next(batches), np.empty_like(out)), 2000)
    learned = SimpleNamespace(td_errors=rng.normal(size=32).astype(np.float32))

    def sample_and_update():
        batch = replay.sample(0.5)
        replay.update_priorities(batch.indices, learned)

    figures["sample_update"] = median_us(sample_and_update, 2000)
    if args.parts:
        figures["parts"] = parts_us(replay, sample_and_update, 2000)
    if args.steps:

        def training_step():
            batch = replay.sample(0.5)
            replay.update_priorities(batch.indices, agent.learn(batch))

        median_us(training_step, 10)  # torch's first updates are slower
        figures["step_ms"] = median_us(training_step, args.steps) / 1000
    return figures


# The parts of `sample+update` timed by `--parts` ("the rest" is the buffer's own code): (name,
# owner, attributes); an owner is an attribute of the replay, None for the replay, or a module.
PARTS = (
    ("sampler.sample", "sampler", ("sample",)),
    ("importance weights", buffer_module, ("importance_weights",)),
    ("gather", "storage", ("gather_transitions",)),
    ("sampler.update", "sampler", ("update",)),
    ("statistics", "statistics", ("sampled", "learned")),
    ("priority signal", None, ("_signal",)),
)


def parts_us(replay: ReplayBuffer, sample_and_update, repeats: int) -> dict[str, float]:
    """Median µs per call of `sample_and_update` spent in each of PARTS, and the rest."""
    spent, call, totals = {name: np.zeros(repeats) for name, _, _ in PARTS}, [0], np.zeros(repeats)
    with contextlib.ExitStack() as patches:
        for name, owner, attributes in PARTS:
            owner = replay if owner is None else owner
            owner = getattr(replay, owner) if isinstance(owner, str) else owner
            for attribute in attributes:
                part = timed_part(getattr(owner, attribute), spent[name], call)
                patches.enter_context(mock.patch.object(owner, attribute, part))
        for index in range(repeats):
            call[0], start = index, time.perf_counter()
            sample_and_update()
            totals[index] = time.perf_counter() - start
    spent["the rest"] = totals - sum(spent.values())
    return {name: float(np.median(seconds)) * 1e6 for name, seconds in spent.items()}


def timed_part(part, seconds: np.ndarray, call: list[int]):
    """`part`, a function, adding its time to `seconds[call[0]]`; a priority signal, a copy
    whose `priorities` does (the signal is a frozen record that every replay shares)."""
    if isinstance(part, PrioritySignal):
        return dataclasses.replace(part, priorities=timed_part(part.priorities, seconds, call))
    return timed(part, lambda elapsed: np.add.at(seconds, call[0], elapsed))


def filled_sampler(kind: str, size: int):
    sampler = SAMPLERS[kind](size, np.random.default_rng(0))
    for slot in range(size):
        sampler.add(slot)
    td_errors = np.random.default_rng(1).standard_normal(size) * 0.5
    sampler.update(np.arange(size), td_error_priorities(td_errors, EPSILON, 1.0))
    return sampler


def sampler_steps(sampler, td_errors: np.ndarray, normalization: str) -> tuple[float, float]:
    """(wall-clock, CPU) seconds of a batch per row of `td_errors`."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for errors in td_errors:
        indices, probabilities = sampler.sample(BATCH_SIZE)
        minimum = sampler.min_probability() if normalization == "buffer" else None
        importance_weights(probabilities, EXPONENT, normalization, minimum)
        sampler.update(indices, td_error_priorities(errors, EPSILON, 1.0))
    return time.perf_counter() - wall, time.thread_time() - cpu


def phase_ns(sampler, td_errors: np.ndarray) -> np.ndarray:
    """The median ns of each phase (sample, weights, update) over the batches."""
    clock, spent = time.perf_counter_ns, np.empty((len(td_errors), 3))
    for row_index, errors in enumerate(td_errors):
        t0 = clock()
        indices, probabilities = sampler.sample(BATCH_SIZE)
        t1 = clock()
        importance_weights(probabilities, EXPONENT, "batch")
        t2 = clock()
        sampler.update(indices, td_error_priorities(errors, EPSILON, 1.0))
        spent[row_index] = (t1 - t0, t2 - t1, clock() - t2)
    return np.median(spent, axis=0)


def samplers_alone(args) -> str:
    samplers = {kind: filled_sampler(kind, args.capacity) for kind in args.kinds}
    td_errors = np.random.default_rng(2).standard_normal((args.batches, BATCH_SIZE)) * 0.5
    for sampler in samplers.values():  # warm-up of both normalizations: kernels, caches
        for normalization in ("batch", "buffer"):
            sampler_steps(sampler, td_errors[: args.batches // 10], normalization)
    runs = {kind: [] for kind in samplers}
    for _ in range(args.repeats):  # in turns, so that a busy machine slows every sampler alike
        for kind, sampler in samplers.items():
            steps = [sampler_steps(sampler, td_errors, n) for n in ("batch", "buffer")]
            runs[kind].append(np.ravel(steps))
    body = []
    for kind, sampler in samplers.items():
        totals = np.median(runs[kind], axis=0) / args.batches * 1e6
        phases = phase_ns(sampler, td_errors) / 1e3
        body.append([kind, *(f"{us:.1f}" for us in (*totals, *phases))])
    return markdown(["sampler, µs per batch", *ALONE], body)


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--capacity", type=int, default=2**20)
    parser.add_argument("--eviction", choices=list(STORAGES), default="fifo")
    parser.add_argument("--steps", type=int, default=100, help="training steps timed per kind")
    parser.add_argument("--kinds", nargs="+", choices=list(SAMPLERS), default=list(SAMPLERS))
    parser.add_argument("--parts", action="store_true", help="where sample+update's time goes")
    parser.add_argument("--samplers-alone", action="store_true", help="no memory, no frames")
    parser.add_argument("--repeats", type=int, default=7, help="--samplers-alone's")
    parser.add_argument("--batches", type=int, default=5000, help="--samplers-alone's per repeat")
    args = parser.parse_args()
    if args.samplers_alone:
        load = f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
        print(f"N = {args.capacity:,}, {args.repeats} x {args.batches} batches; {load}")
        print(samplers_alone(args))
        return
    rng = np.random.default_rng(0)
    settings = AgentSettings(device="cpu")
    agent = DoubleDQN(
        6, settings, rng=np.random.default_rng(1), frame_shape=(84, 84), batch_size=32
    )
    print(f"N = {args.capacity:,} transitions, eviction {args.eviction}, batch 32, CPU")
    head = ["sampler", "bytes/transition", "checked bytes", "gather µs", "fresh-array µs"]
    head += ["sample+update µs"] + ["step ms"] * bool(args.steps)
    print(markdown(head, []))
    uniform_step = None
    for kind in args.kinds:
        f = measure(kind, args, agent, rng)
        cells = [kind, f"{f['bytes']:,.0f}", f"{f['checked']:,}", f"{f['gather_reused']:,.0f}"]
        cells += [f"{f['gather_fresh']:,.0f}", f"{f['sample_update']:,.1f}"]
        if args.steps:
            uniform_step = uniform_step or f["step_ms"]
            overhead = 100 * (f["step_ms"] / uniform_step - 1)
            cells.append(f"{f['step_ms']:.1f} ({overhead:+.1f} % vs {args.kinds[0]})")
        print(row(cells), flush=True)
        for name, us in f.get("parts", {}).items():
            print(f"    {name:<24}{us:>8.1f} µs")


if __name__ == "__main__":
    main()
