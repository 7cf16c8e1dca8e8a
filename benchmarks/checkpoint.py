"""Time and memory of checkpointing a full replay memory, and of reading it back.

    python benchmarks/checkpoint.py                           # the paper's 1M transitions
    python benchmarks/checkpoint.py --capacity 100000 --more 25000   # a quicker look

A proportional replay of random 84x84 frames is saved as training saves it (CheckpointStore,
keep 2) every `--more` transitions: the first two saves write a whole frame copy each, the third
brings the first copy up to date. A save is synchronous: its time is the training's stall. The
newest checkpoint is then read back with its files evicted from the page cache, as on a fresh
machine. Each phase runs again into a second store with free checksums, for what the CRC-32s
cost. Needs about 4 x 7 GB of disk in `--dir` at full size, and deletes what it wrote.
"""

import contextlib
import io
import os
import resource
import tempfile
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from common import command_line, timed

from agents.double_dqn import DoubleDQN
from agents.settings import AgentSettings
from artifacts.command_line import PROC, kernel_bytes
from replay.buffer import ReplayBuffer
from replay.proportional import ProportionalSampler
from replay.storage import FrameStorage
from training import checkpoints
from training.checkpoints import CheckpointStore

GB = 1e9


def memory(field: str) -> float:
    """A /proc/self/status figure: VmRSS now, or VmHWM, the peak since its reset."""
    return kernel_bytes(PROC / "self/status", field) / GB


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


@contextlib.contextmanager
def checksums(free: bool):
    """The CRC-32s of `training.checkpoints`, timed (the seconds of each, in the thread that
    hashes beside the writes and reads), or, `free`, made to cost nothing: every one is 0, so
    the copies they check still read back."""
    seconds = []  # appended to from the hashing thread: list.append is atomic
    crc32 = timed((lambda data: 0) if free else zlib.crc32, seconds.append)
    checkpoints.zlib = SimpleNamespace(crc32=crc32)
    checkpoints._zero_checksum.cache_clear()
    try:
        yield seconds
    finally:
        checkpoints.zlib = zlib
        checkpoints._zero_checksum.cache_clear()


def with_and_without_checksums(what: str, phase, checked_first: bool) -> None:
    """`phase(free)` (a save or a resume, its seconds) with the checksums and, into a second
    store, without them, in the order given: the first of two after a long write can pay for
    the other's writeback, so the order alternates."""
    seconds = {}
    for free in (False, True) if checked_first else (True, False):
        quiet = contextlib.redirect_stdout(io.StringIO()) if free else contextlib.nullcontext()
        with checksums(free) as crc_seconds, quiet:
            seconds[free] = phase(free)
        if not free:
            hashing = sum(crc_seconds)
    share = 1 - seconds[True] / seconds[False]  # below 0 where the two differ by noise alone
    print(
        f"  {what}: CRC-32s {hashing:5.1f} s beside it; without them {seconds[True]:5.1f} s: "
        f"the checksums' share of its time {share:+4.0%}"
    )


def timed_phase(what: str, phase) -> float:
    """The seconds of `phase()`, printed with its note and this process's resident memory."""
    before = memory("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets VmHWM, the peak
    start = time.perf_counter()
    note = phase()
    seconds = time.perf_counter() - start
    print(
        f"{what}: {seconds:6.1f} s  {note}RSS before {before:5.2f} GB, "
        f"peak {memory('VmHWM'):5.2f} GB, after {memory('VmRSS'):5.2f} GB"
    )
    return seconds


def save(store: CheckpointStore, step: int, agent, replay, rng) -> str:
    """A save of what Training.state_dict holds, but for the env and the TensorBoard counters."""
    state = {"agent": agent.state_dict(), "replay": replay.state_dict()}
    state["rngs"] = {"sampler": rng.bit_generator.state}
    storage = replay.storage
    path = store.save(step, state, storage.frames, storage.frames_written)
    return f"state file {path.stat().st_size / 1e6:5.0f} MB  "


def timed_resume(store: CheckpointStore, replay: ReplayBuffer) -> float:
    """The seconds of reading the newest checkpoint into the live replay, as `Training.start`
    does, its files first evicted from the page cache, as on a fresh machine."""
    for path in store.directory.iterdir():
        with open(path, "rb") as file:
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)

    def resume() -> str:
        payload = store.read_latest()
        store.read_frames(payload, replay.storage.frames)
        replay.load_state_dict(payload["state"]["replay"])
        return ""

    return timed_phase("resume from checkpoint 3 (page cache evicted)", resume)


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--more", type=int, default=250_000, help="transitions per period")
    parser.add_argument("--dir", type=Path, default=None, help="where its temporary directory goes")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="checkpoint-benchmark-", dir=args.dir) as directory:
        start = time.perf_counter()
        storage = FrameStorage(args.capacity, history_length=4, frame_shape=(84, 84))
        replay = ReplayBuffer(
            storage, ProportionalSampler(args.capacity, rng), 32, td_error_clip=1.0
        )
        settings = AgentSettings(device="cpu")
        agent = DoubleDQN(
            4, settings, rng=np.random.default_rng(1), frame_shape=(84, 84), batch_size=32
        )
        add_transitions(replay, args.capacity, rng)
        agent.learn(replay.sample(0.4))  # the optimizer's state exists from the first update
        print(
            f"filled {args.capacity} transitions in {time.perf_counter() - start:.0f} s; "
            f"frames {storage.frames.nbytes / GB:.2f} GB, RSS {memory('VmRSS'):.2f} GB"
        )
        stores = {
            free: CheckpointStore(Path(directory, "unchecked" if free else "checkpoints"), keep=2)
            for free in (False, True)
        }
        for step in (1, 2, 3):
            if step > 1:
                add_transitions(replay, args.more, rng)
            with_and_without_checksums(
                f"checkpoint {step}",
                lambda free, step=step: timed_phase(
                    f"checkpoint {step}", lambda: save(stores[free], step, agent, replay, rng)
                ),
                checked_first=step % 2 == 0,
            )
        with_and_without_checksums(
            "resume", lambda free: timed_resume(stores[free], replay), checked_first=True
        )
        usage = sum(p.stat().st_size for p in stores[False].directory.iterdir())
        print(f"disk used by the two checkpoints: {usage / GB:.2f} GB")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB
        print(f"peak RSS of the whole process (ru_maxrss): {peak:.2f} GB")


if __name__ == "__main__":
    main()
