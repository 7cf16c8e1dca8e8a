"""Replay memory per stored transition and the cost of gathering a batch of states.

    python benchmarks/storage.py                      # the paper's 1M transitions (~7 GB)
    python benchmarks/storage.py --capacity 100000    # a quicker look

Prints figures; it asserts nothing. RAM is the growth of this process's resident set while a
replay of each sampler kind is filled with Atari-sized frames, divided by the transitions held.
"""

import argparse
import time

import numpy as np

from replay.buffer import ReplayBuffer
from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import UniformSampler
from replay.storage import FrameStorage

SAMPLERS = {
    "uniform": UniformSampler,
    "proportional": ProportionalSampler,
    "rank_based": RankBasedSampler,
}


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def filled_replay(kind: str, capacity: int, batch_size: int, rng: np.random.Generator):
    """A replay holding `capacity` transitions of random frames, in episodes of 1000 steps."""
    storage = FrameStorage(capacity)
    replay = ReplayBuffer(storage, SAMPLERS[kind](capacity, rng), batch_size)
    frames = rng.integers(0, 256, size=(64, 84, 84), dtype=np.uint8)
    replay.start_episode(frames[0])
    for step in range(1, capacity + 1):
        if step % 1000 == 0:
            replay.start_episode(frames[step % 64])
        else:
            replay.add(int(step % 6), 0.0, False, frames[step % 64])
    return replay


def time_gathers(storage: FrameStorage, slots: np.ndarray, repeats: int) -> tuple[float, float]:
    """Median µs to gather the states and next states of `slots`: reused vs fresh output."""
    out = np.empty((len(slots), storage.history_length, 84, 84), dtype=np.uint8)
    reused, fresh = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        storage.gather_states(slots, out)
        reused.append(time.perf_counter() - start)
        start = time.perf_counter()
        storage.gather_states(slots, np.empty_like(out))
        fresh.append(time.perf_counter() - start)
    return np.median(reused) * 1e6, np.median(fresh) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"capacity {args.capacity:,} transitions, batch {args.batch_size}")
    print(f"{'sampler':<14}{'bytes/transition':>18}{'gather reused µs':>18}{'gather fresh µs':>17}")
    for kind in SAMPLERS:
        before = resident_bytes()
        replay = filled_replay(kind, args.capacity, args.batch_size, rng)
        per_transition = (resident_bytes() - before) / len(replay)
        indices, _ = replay.sampler.sample(args.batch_size)
        slots = np.concatenate([indices, (indices + 1) % args.capacity])
        reused, fresh = time_gathers(replay.storage, slots, args.repeats)
        print(f"{kind:<14}{per_transition:>18,.0f}{reused:>18,.0f}{fresh:>17,.0f}")
        del replay


if __name__ == "__main__":
    main()
