"""The replay samplers' hot path at the paper's scale, without the frames.

    python benchmarks/samplers.py [--size 1048576] [--repeats 7]

Each sampler is filled to `--size` slots with the paper's priorities, min(|δ|, 1) + ε of random
TD errors, and warmed up (numba compiles on first use). Then `sample(32)`, the importance
weights (normalized by the batch's maximum or the buffer's) and `update(32)` run as the replay
runs them: µs per batch, medians over the repeats, wall clock and CPU time (waiting for a core
shows in the wall clock only), then each phase's median (batch normalization). The samplers
take turns, repeat by repeat, so that a busy machine slows all of them alike. Prints a table,
asserts nothing.
"""

import argparse
import time

import numpy as np
from common import machine, markdown

from replay.priorities import importance_weights
from replay.priority_signals import td_error_priorities
from replay.registry import SAMPLERS

BATCH_SIZE, EXPONENT, EPSILON = 32, 0.5, 0.01
COLUMNS = ("batch wall", "batch cpu", "buffer wall", "buffer cpu", "sample", "weights", "update")


def filled(kind: str, size: int):
    sampler = SAMPLERS[kind](size, np.random.default_rng(0))
    for slot in range(size):
        sampler.add(slot)
    td_errors = np.random.default_rng(1).standard_normal(size) * 0.5
    for start in range(0, size, 4096):
        slots = np.arange(start, min(start + 4096, size))
        sampler.update(slots, td_error_priorities(td_errors[slots], EPSILON, 1.0))
    return sampler


def replay_steps(sampler, td_errors: np.ndarray, normalization: str) -> tuple[float, float]:
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
    for row, errors in enumerate(td_errors):
        t0 = clock()
        indices, probabilities = sampler.sample(BATCH_SIZE)
        t1 = clock()
        importance_weights(probabilities, EXPONENT, "batch")
        t2 = clock()
        sampler.update(indices, td_error_priorities(errors, EPSILON, 1.0))
        spent[row] = (t1 - t0, t2 - t1, clock() - t2)
    return np.median(spent, axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2**20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batches", type=int, default=5000)
    args = parser.parse_args()
    print(
        f"N = {args.size:,}, batch {BATCH_SIZE}, {args.repeats} x {args.batches} batches; "
        + machine()
    )
    samplers = {kind: filled(kind, args.size) for kind in SAMPLERS}
    td_errors = np.random.default_rng(2).standard_normal((args.batches, BATCH_SIZE)) * 0.5
    for sampler in samplers.values():  # warm-up of both normalizations: kernels, caches
        for normalization in ("batch", "buffer"):
            replay_steps(sampler, td_errors[: args.batches // 10], normalization)
    runs = {kind: [] for kind in samplers}
    for _ in range(args.repeats):
        for kind, sampler in samplers.items():
            runs[kind].append(
                np.ravel([replay_steps(sampler, td_errors, n) for n in ("batch", "buffer")])
            )
    body = []
    for kind, sampler in samplers.items():
        totals = np.median(runs[kind], axis=0) / args.batches * 1e6
        phases = phase_ns(sampler, td_errors) / 1e3
        body.append([kind, *(f"{us:.1f}" for us in (*totals, *phases))])
    print(markdown(["sampler, µs per batch", *COLUMNS], body))


if __name__ == "__main__":
    main()
