"""Replay memory per stored transition, batch costs and the prioritized overhead of a step.

    python benchmarks/replay_memory.py                    # N = 2^20 frames (~7.4 GB per kind)
    python benchmarks/replay_memory.py --capacity 100000  # a quicker look
    python benchmarks/replay_memory.py --capacity 50000 --eviction lowest_priority
    python benchmarks/replay_memory.py --kinds proportional --steps 0 --parts

For each sampler kind (`--kinds`), on a memory of the storage `--eviction` picks (`fifo`: the
frame ring; `lowest_priority`: whole transitions, ~35 KB each) filled with N Atari-sized
transitions: resident bytes per transition, beside what the config check
(`replay.buffer.memory_bytes`) counts; µs to gather the 32 states and next states of a freshly
drawn batch into a reused vs a fresh array (a new batch each time, so the frames come from
memory, not from the cache, as in training); µs for a whole `replay.sample` (sampler,
importance weights, gather) and `update_priorities`; and ms for a whole training step —
sample, `agent.learn`, `update_priorities` — with its overhead over uniform replay (`--steps
0`: not measured). `--parts` adds where the time of `sample+update` goes (PARTS, timed inside
it; "the rest" is the buffer's own code between them). Prints figures; asserts nothing.
Timings are medians; compare ratios from one run.
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

# The project runs from its checkout (docs/checkout.md).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import replay.buffer as buffer_module  # noqa: E402
from agents.double_dqn import DoubleDQN  # noqa: E402
from agents.settings import AgentSettings  # noqa: E402
from replay.buffer import ReplayBuffer, memory_bytes  # noqa: E402
from replay.priority_signals import PrioritySignal  # noqa: E402
from replay.registry import SAMPLERS, STORAGES, build_storage  # noqa: E402

EPISODE_STEPS = 1000
HISTORY_LENGTH = 4


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def filled_replay(
    kind: str, eviction: str, capacity: int, rng: np.random.Generator
) -> ReplayBuffer:
    """Random frames in episodes of 1000 steps, written through the storage's own API."""
    storage = build_storage(eviction, capacity, HISTORY_LENGTH, (84, 84))
    replay = ReplayBuffer(storage, SAMPLERS[kind](capacity, rng), batch_size=32, td_error_clip=1.0)
    frames = rng.integers(0, 256, size=(97, 84, 84), dtype=np.uint8)
    replay.start_episode(frames[0])
    for step in range(1, capacity):
        if step % EPISODE_STEPS == 0:
            replay.start_episode(frames[step % 97])
        else:
            replay.add(step % 4, 0.0, False, frames[step % 97])
    return replay


def median_us(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


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
    before = resident_bytes()
    replay = filled_replay(kind, args.eviction, args.capacity, rng)
    figures = {"bytes": (resident_bytes() - before) / len(replay)}
    frames_per_slot = type(replay.storage).frames_per_slot(HISTORY_LENGTH)
    figures["checked"] = memory_bytes(1, (84, 84), frames_per_slot)
    batches = iter([replay.sampler.sample(32)[0] for _ in range(4000)])
    out = np.empty((64, HISTORY_LENGTH, 84, 84), dtype=np.uint8)
    storage = replay.storage
    figures["gather_reused"] = median_us(
        lambda: storage.gather_transitions(next(batches), out), 2000
    )
    figures["gather_fresh"] = median_us(
        lambda: storage.gather_transitions(next(batches), np.empty_like(out)), 2000
    )
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


# The parts of `sample+update` timed by `--parts`: (name, owner, attributes); an owner is an
# attribute of the replay, None for the replay itself, or a module.
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
    spent = dict.fromkeys([name for name, _, _ in PARTS], 0.0)
    originals = []
    for name, owner, attributes in PARTS:
        owner = replay if owner is None else owner
        owner = getattr(replay, owner) if isinstance(owner, str) else owner
        for attribute in attributes:
            original = getattr(owner, attribute)
            originals.append((owner, attribute, original))
            setattr(owner, attribute, timed(original, spent, name))
    totals, rows = [], {name: [] for name in spent}
    try:
        for _ in range(repeats):
            spent.update(dict.fromkeys(spent, 0.0))
            start = time.perf_counter()
            sample_and_update()
            totals.append(time.perf_counter() - start)
            for name, seconds in spent.items():
                rows[name].append(seconds)
    finally:
        for owner, attribute, original in originals:
            setattr(owner, attribute, original)
    figures = {name: float(np.median(seconds)) * 1e6 for name, seconds in rows.items()}
    rest = np.asarray(totals) - np.sum([rows[name] for name in rows], axis=0)
    figures["the rest"] = float(np.median(rest)) * 1e6
    return figures


def timed(part, spent: dict[str, float], name: str):
    """`part`, a function, adding its time to `spent[name]`; a priority signal, a copy whose
    `priorities` does (the signal is a frozen record that every replay shares)."""
    if isinstance(part, PrioritySignal):
        return dataclasses.replace(part, priorities=timed(part.priorities, spent, name))

    def call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return part(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=2**20)
    parser.add_argument("--eviction", choices=list(STORAGES), default="fifo")
    parser.add_argument("--steps", type=int, default=100, help="training steps timed per kind")
    parser.add_argument("--kinds", nargs="+", choices=list(SAMPLERS), default=list(SAMPLERS))
    parser.add_argument("--parts", action="store_true", help="where sample+update's time goes")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    agent = DoubleDQN(
        6,
        AgentSettings(device="cpu"),
        rng=np.random.default_rng(1),
        frame_shape=(84, 84),
        batch_size=32,
    )
    print(f"N = {args.capacity:,} transitions, eviction {args.eviction}, batch 32, CPU")
    header = (
        "sampler",
        "bytes/transition",
        "checked bytes",
        "gather µs",
        "fresh-array µs",
        "sample+update µs",
    )
    print(f"{header[0]:<14}" + "".join(f"{h:>18}" for h in header[1:]) + f"{'step ms':>10}")
    uniform_step = None
    for kind in args.kinds:
        f = measure(kind, args, agent, rng)
        step = ""
        if args.steps:
            uniform_step = uniform_step or f["step_ms"]
            overhead = f" ({100 * (f['step_ms'] / uniform_step - 1):+.1f} % vs {args.kinds[0]})"
            step = f"{f['step_ms']:>10.1f}{overhead}"
        print(
            f"{kind:<14}{f['bytes']:>18,.0f}{f['checked']:>18,}{f['gather_reused']:>18,.0f}"
            f"{f['gather_fresh']:>18,.0f}{f['sample_update']:>18,.1f}{step}",
            flush=True,
        )
        for name, us in f.get("parts", {}).items():
            print(f"    {name:<24}{us:>8.1f} µs")


if __name__ == "__main__":
    main()
