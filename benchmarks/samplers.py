"""Times the replay samplers' hot path at the paper's scale.

For each sampler (uniform, proportional, rank-based): fill to N = 2^20 sampleable slots with
random priorities, warm up (numba compiles on first use; the compiled code is cached on disk),
then time `sample(32)` + `importance_weights` + `update(32)` (with the paper's priorities
min(|δ|, 1) + ε of random TD errors, computed inside the timed update as the replay buffer
does) and print µs per batch, the median over repeats, with a per-phase breakdown. The
samplers take turns, repeat by repeat, so that a busy machine slows all of them alike; CPU
time is printed beside the wall clock because on a shared 2-core machine waiting for a core
can dominate the latter.

Run from the repository root: python benchmarks/samplers.py [--size 1048576] [--repeats 7]
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay.priorities import importance_weights  # noqa: E402
from replay.priority_signals import td_error_priorities  # noqa: E402
from replay.proportional import ProportionalSampler  # noqa: E402
from replay.rank_based import RankBasedSampler  # noqa: E402
from replay.sampler import UniformSampler  # noqa: E402

BATCH_SIZE = 32
IMPORTANCE_EXPONENT = 0.5
PRIORITY_EPSILON = 0.01
NAMES = ("uniform", "proportional", "rank_based")
COLUMNS = ("batch wall", "batch cpu", "buffer wall", "buffer cpu", "sample", "weights", "update")


def build(name: str, size: int, seed: int):
    rng = np.random.default_rng(seed)
    if name == "uniform":
        sampler = UniformSampler(size, rng)
    elif name == "proportional":
        sampler = ProportionalSampler(size, rng)
    else:
        sampler = RankBasedSampler(size, rng)
    for slot in range(size):
        sampler.add(slot)
    td_errors = np.random.default_rng(seed + 1).standard_normal(size) * 0.5
    for start in range(0, size, 4096):
        slots = np.arange(start, min(start + 4096, size))
        sampler.update(slots, td_error_priorities(td_errors[slots], PRIORITY_EPSILON, 1.0))
    return sampler


def replay_steps(sampler, td_errors: np.ndarray, normalization: str) -> tuple[float, float]:
    """(wall-clock, CPU) seconds for len(td_errors) batches of the training step's loop.

    CPU time leaves out the time the process waited for a core, which on a busy 2-core
    machine can dominate the wall clock."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for errors in td_errors:
        indices, probabilities = sampler.sample(BATCH_SIZE)
        minimum = sampler.min_probability() if normalization == "buffer" else None
        importance_weights(probabilities, IMPORTANCE_EXPONENT, normalization, minimum)
        sampler.update(indices, td_error_priorities(errors, PRIORITY_EPSILON, 1.0))
    return time.perf_counter() - wall, time.thread_time() - cpu


def phase_times(sampler, td_errors: np.ndarray) -> np.ndarray:
    """Median ns of each phase (sample, weights, update) over the batches."""
    clock = time.perf_counter_ns
    spent = np.empty((len(td_errors), 3))
    for row, errors in enumerate(td_errors):
        t0 = clock()
        indices, probabilities = sampler.sample(BATCH_SIZE)
        t1 = clock()
        importance_weights(probabilities, IMPORTANCE_EXPONENT, "batch")
        t2 = clock()
        sampler.update(indices, td_error_priorities(errors, PRIORITY_EPSILON, 1.0))
        spent[row] = (t1 - t0, t2 - t1, clock() - t2)
    return np.median(spent, axis=0)


def measure(size: int, repeats: int, batches: int) -> dict[str, dict]:
    """Runs the samplers round-robin, so that all of them see the same machine load."""
    samplers, results = {}, {}
    for name in NAMES:
        started = time.perf_counter()
        samplers[name] = build(name, size, seed=0)
        results[name] = {"fill s": time.perf_counter() - started, "runs": []}
    td_errors = np.random.default_rng(2).standard_normal((batches, BATCH_SIZE)) * 0.5
    for sampler in samplers.values():  # warm-up of both normalizations: kernels, caches
        for normalization in ("batch", "buffer"):
            replay_steps(sampler, td_errors[: batches // 10], normalization)
    for _ in range(repeats):
        for name, sampler in samplers.items():
            runs = [replay_steps(sampler, td_errors, norm) for norm in ("batch", "buffer")]
            results[name]["runs"].append(np.ravel(runs))
    for name, sampler in samplers.items():
        medians = np.median(results[name].pop("runs"), axis=0) / batches * 1e6
        results[name].update(zip(COLUMNS[:4], medians, strict=True))
        results[name].update(zip(COLUMNS[4:], phase_times(sampler, td_errors) / 1e3, strict=True))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2**20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batches", type=int, default=5000)
    args = parser.parse_args()
    print(
        f"N = {args.size}, batch {BATCH_SIZE}. µs per batch of sample + importance weights +"
        f" update: medians of {args.repeats} runs of {args.batches} batches, wall clock and"
        f" CPU time, weights normalized by the batch or the buffer maximum. Phases: per-batch"
        f" medians (wall clock, batch normalization). Load average at start:"
        f" {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs."
    )
    results = measure(args.size, args.repeats, args.batches)
    print(f"{'sampler':<14}" + "".join(f"{column:>13}" for column in COLUMNS) + "   fill s")
    for name, result in results.items():
        cells = "".join(f"{result[column]:>13.1f}" for column in COLUMNS)
        print(f"{name:<14}{cells}{result['fill s']:>9.1f}")


if __name__ == "__main__":
    main()
