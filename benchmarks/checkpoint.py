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
/proc/self/clear_refs), so "peak - before" is what the phase allocated at most.

What the frame copies' checksums cost: the time spent in the CRC-32s (in a thread beside the
writes and reads), and each save and the resume done a second time, into a second store, with
a CRC-32 that costs nothing. Needs about 4 x 7 GB of disk in `--dir` at full size and deletes
what it wrote.
"""

import argparse
import contextlib
import io
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np

# The project runs from its checkout (docs/checkout.md).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.double_dqn import DoubleDQN  # noqa: E402
from agents.settings import AgentSettings  # noqa: E402
from replay.buffer import ReplayBuffer  # noqa: E402
from replay.proportional import ProportionalSampler  # noqa: E402
from replay.storage import FrameStorage  # noqa: E402
from training import checkpoints  # noqa: E402
from training.checkpoints import CheckpointStore  # noqa: E402

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


@contextlib.contextmanager
def checksums(free: bool):
    """The CRC-32s of `training.checkpoints`, timed (`seconds`: the time spent in them, in the
    thread that hashes beside the writes and reads), or, `free`, made to cost nothing: every
    one is 0, so the copies they check still read back."""
    timer, lock = SimpleNamespace(seconds=0.0), threading.Lock()

    def crc32(data) -> int:
        start = time.perf_counter()
        value = 0 if free else zlib.crc32(data)
        with lock:
            timer.seconds += time.perf_counter() - start
        return value

    checkpoints.zlib = SimpleNamespace(crc32=crc32)
    checkpoints._zero_checksum.cache_clear()
    try:
        yield timer
    finally:
        checkpoints.zlib = zlib
        checkpoints._zero_checksum.cache_clear()


def with_and_without_checksums(what: str, timed, checked_first: bool) -> None:
    """`timed(free)` (a save or a resume, its seconds) with the checksums and, into a second
    store, without them, in the order given: the first of two after a long write can pay for
    the other's writeback, so the order alternates."""
    seconds = {}
    for free in (False, True) if checked_first else (True, False):
        quiet = contextlib.redirect_stdout(io.StringIO()) if free else contextlib.nullcontext()
        with checksums(free) as crc, quiet:
            seconds[free] = timed(free)
        if not free:
            hashing = crc.seconds
    share = 1 - seconds[True] / seconds[False]  # below 0 where the two differ by noise alone
    print(
        f"  {what}: CRC-32s {hashing:5.1f} s beside it; without them {seconds[True]:5.1f} s: "
        f"the checksums' share of its time {share:+4.0%}"
    )


def timed_save(store, step, agent, replay, rng) -> float:
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
    return seconds


def evict(directory: Path) -> None:
    for path in directory.iterdir():
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def timed_resume(store: CheckpointStore, replay: ReplayBuffer) -> float:
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
    return seconds


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
            4,
            AgentSettings(device="cpu"),
            rng=np.random.default_rng(1),
            frame_shape=(84, 84),
            batch_size=32,
        )
        add_transitions(replay, args.capacity, rng)
        agent.learn(replay.sample(0.4))  # the optimizer's state exists from the first update
        print(
            f"filled {args.capacity} transitions in {time.perf_counter() - start:.0f} s; "
            f"frames {storage.frames.nbytes / GB:.2f} GB, RSS {memory('VmRSS'):.2f} GB"
        )
        stores = {
            free: CheckpointStore(root / ("unchecked" if free else "checkpoints"), keep=2)
            for free in (False, True)
        }
        for step in (1, 2, 3):
            if step > 1:
                add_transitions(replay, args.more, rng)
            with_and_without_checksums(
                f"checkpoint {step}",
                lambda free, step=step: timed_save(stores[free], step, agent, replay, rng),
                checked_first=step % 2 == 0,
            )
        with_and_without_checksums(
            "resume", lambda free: timed_resume(stores[free], replay), checked_first=True
        )
        usage = sum(p.stat().st_size for p in stores[False].directory.iterdir())
        print(f"disk used by the two checkpoints: {usage / GB:.2f} GB")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB
        print(f"peak RSS of the whole process (ru_maxrss): {peak:.2f} GB")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
