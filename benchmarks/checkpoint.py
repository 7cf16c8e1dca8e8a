"""Time and memory of checkpointing a full replay memory, and of reading it back.

    python benchmarks/checkpoint.py                           # the paper's 1M transitions
    python benchmarks/checkpoint.py --capacity 100000 --more 25000   # a quicker look

Prints figures; it asserts nothing. Fills a proportional replay with random 84x84 frames, then
saves the way training does (CheckpointStore, keep 2) every `--more` transitions: the first two
checkpoints create the two frame copies (each writes the whole ring), the third brings the first
copy up to date (only the slots written since it was synced: 2 x `--more`). A save is synchronous,
so its time is the training stall. Then reads the newest checkpoint back after evicting its files
from the page cache, as a resume on a fresh machine would. RSS is this process's resident set
(/proc/self/status); "peak" is its high-water mark during the phase (reset through
/proc/self/clear_refs), so "peak - before" is what the phase allocated at most. Needs about
2 x 7 GB of disk in `--dir` at full size and deletes what it wrote.
"""

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from agents.double_dqn import DoubleDQN
from replay.buffer import ReplayBuffer
from replay.proportional import ProportionalSampler
from replay.storage import FrameStorage
from training.checkpoints import CheckpointStore

GB = 1e9


def memory(field: str) -> float:
    """A /proc/self/status figure in GB: VmRSS now, or VmHWM, the peak since the last reset."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / GB
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def add_transitions(replay: ReplayBuffer, count: int, rng: np.random.Generator) -> None:
    """`count` steps of random frames in episodes of 1000 steps, each sampled and updated once
    per 4 steps like training, so the sum tree holds varied priorities."""
    frames = rng.integers(0, 256, size=(256, 84, 84), dtype=np.uint8)
    for step in range(count):
        frame = frames[step % 256]
        if replay.storage.frames_written % 1000 == 0:
            replay.start_episode(frame)
        else:
            replay.add(int(step % 4), 0.0, False, frame)
        if step % 4 == 0 and len(replay) >= replay.batch_size:
            batch = replay.sample(0.4)
            errors = rng.normal(size=replay.batch_size)
            replay.update_priorities(batch.indices, SimpleNamespace(td_errors=errors))


def state_of(agent: DoubleDQN, replay: ReplayBuffer, rng: np.random.Generator) -> dict:
    """What Training.state_dict holds, but for the env (~100 kB) and the TensorBoard counters."""
    return {
        "agent": agent.state_dict(),
        "replay": replay.state_dict(),
        "rngs": {"sampler": rng.bit_generator.state},
    }


def timed_save(store, step, agent, replay, rng) -> None:
    storage = replay.storage
    before = memory("VmRSS")
    reset_peak()
    start = time.perf_counter()
    path = store.save(step, state_of(agent, replay, rng), storage.frames, storage.frames_written)
    seconds = time.perf_counter() - start
    print(
        f"checkpoint {step}: {seconds:6.1f} s  state file {path.stat().st_size / 1e6:5.0f} MB  "
        f"RSS before {before:5.2f} GB, peak {memory('VmHWM'):5.2f} GB, "
        f"after {memory('VmRSS'):5.2f} GB"
    )


def evict(directory: Path) -> None:
    for path in directory.iterdir():
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def timed_resume(store: CheckpointStore, replay: ReplayBuffer) -> None:
    """Read the newest checkpoint into the live replay, as `Training.start` does."""
    evict(store.directory)
    before = memory("VmRSS")
    reset_peak()
    start = time.perf_counter()
    payload = store.read_latest()
    store.read_frames(payload, replay.storage.frames)
    replay.load_state_dict(payload["state"]["replay"])
    seconds = time.perf_counter() - start
    print(
        f"resume from checkpoint {payload['step']} (page cache evicted): {seconds:6.1f} s  "
        f"RSS before {before:5.2f} GB, peak {memory('VmHWM'):5.2f} GB, "
        f"after {memory('VmRSS'):5.2f} GB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--more", type=int, default=250_000, help="transitions per period")
    parser.add_argument("--dir", type=Path, default=None, help="default: a temporary directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="checkpoint-benchmark-", dir=args.dir))
    rng = np.random.default_rng(0)
    try:
        start = time.perf_counter()
        storage = FrameStorage(args.capacity, history_length=4, frame_shape=(84, 84))
        sampler = ProportionalSampler(args.capacity, rng)
        replay = ReplayBuffer(storage, sampler, 32, td_error_clip=1.0)
        agent = DoubleDQN(
            4, rng=np.random.default_rng(1), device="cpu", frame_shape=(84, 84), batch_size=32
        )
        add_transitions(replay, args.capacity, rng)
        agent.learn(replay.sample(0.4))  # the optimizer's state exists from the first update
        print(
            f"filled {args.capacity} transitions in {time.perf_counter() - start:.0f} s; "
            f"frames {storage.frames.nbytes / GB:.2f} GB, RSS {memory('VmRSS'):.2f} GB"
        )
        store = CheckpointStore(root / "checkpoints", keep=2)
        for step in (1, 2, 3):
            if step > 1:
                add_transitions(replay, args.more, rng)
            timed_save(store, step, agent, replay, rng)
        timed_resume(store, replay)
        usage = sum(p.stat().st_size for p in store.directory.iterdir())
        print(f"disk used by the two checkpoints: {usage / GB:.2f} GB")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB
        print(f"peak RSS of the whole process (ru_maxrss): {peak:.2f} GB")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
