"""Checks that keep train.py from starting where it cannot finish, or where another process is
already running: before Hydra creates anything, once the run directory exists, and what the
machine must give a run whose settings are valid (its cores, GPUs, memory and disk, from the
sizes its replay and files will have)."""

import contextlib
import ctypes
import fcntl
import os
import shutil
from pathlib import Path

import torch
from omegaconf.errors import OmegaConfBaseException

from agents.networks import build_network
from agents.policy import check_pipelined, resolve_device
from artifacts.command_line import available_memory, size_text, unwritable_reason
from artifacts.run_directory import RunDirectory
from envs.registry import environment_kind
from replay.buffer import memory_bytes
from replay.registry import STORAGES
from replay.settings import DEVICE
from schema import refusal
from training.settings import Run

# Command-line keys that name a directory train.py will write into.
DIRECTORY_KEYS = ("resume", "hydra.run.dir", "hydra.sweep.dir")


def error_line(error: Exception) -> str:
    """An error's message as train.py prints it: OmegaConf's (an interpolation to a missing
    key, say) on one line, the key first, without the lines it adds about where."""
    if isinstance(error, OmegaConfBaseException) and getattr(error, "full_key", None):
        first = (str(error).splitlines() or [type(error).__name__])[0]
        return f"{error.full_key}: {first[:1].lower()}{first[1:]}"
    return str(error)


class RunDirectoryError(ValueError):
    """The run directory cannot be used: it holds another run, or is not writable, or busy."""


def check_command_line(arguments: list[str]) -> None:
    """Refuse directory arguments that Hydra would fail on with a traceback (a file given as
    a directory, a place that cannot be written, unless it holds a finished run, whose
    command writes nothing); the default `runs/` is checked too."""
    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in arguments):
        return  # --help, --cfg, --info: Hydra writes nothing
    named = dict(a.split("=", 1) for a in arguments if a.split("=", 1)[0] in DIRECTORY_KEYS)
    if not named:
        named = {"the run directory": "runs"}
    for key, value in named.items():
        if RunDirectory(Path(value)).final_snapshot.is_file():
            continue
        reason = unwritable_reason(Path(value))
        if reason is not None:
            raise RunDirectoryError(f"{key}={value} cannot be used: {reason}")


def torch_threads(setting, resumed_with: int | None = None) -> int:
    """torch's CPU thread count: a number, or `auto`: the count a resumed run ran with
    (`resumed_with`, from its checkpoint: a resume is bit-identical only with it), else
    OMP_NUM_THREADS where set (at most the cores this process may use), else every such core
    (at most 8). Every core is fastest on an idle machine; on a busy one fewer threads can be
    faster, which is what OMP_NUM_THREADS or `threads=1` is for
    (docs/benchmarks.md#cpu-threads-memory-and-layout)."""
    if setting != "auto":
        return int(setting)
    if resumed_with is not None:
        return resumed_with
    cores = len(os.sched_getaffinity(0))
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        # Bounded by the cores as `threads=N` is: threads beyond them only take turns on them.
        return max(1, min(int(os.environ["OMP_NUM_THREADS"]), cores))
    return max(1, min(8, cores))


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's largest on 64-bit systems


def keep_freed_memory() -> None:
    """Let glibc's malloc reuse freed blocks of up to 32 MB instead of returning them to the
    kernel. An update allocates and frees the same activation and gradient buffers every
    time; by default each comes from a fresh mapping that page-faults in again
    (docs/benchmarks.md#cpu-threads-memory-and-layout). Larger blocks (the replay's frames)
    are unchanged. Where the C library is not glibc, nothing changes."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
    mallopt(_M_TRIM_THRESHOLD, 2 * _MMAP_THRESHOLD_MAX)


def lock_run_directory(run_dir: Path) -> int:
    """Hold an exclusive lock on the directory itself (no file is written), so a second
    train.py in the same run directory stops at once instead of cutting the first one's event
    files. Returns the descriptor that holds the lock: closing it, as the job ends, releases
    the lock (a sweep's worker runs other jobs after it, each with a descriptor of its own)."""
    descriptor = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise RunDirectoryError(
            f"run directory {run_dir} is in use by another train.py process; wait for it to "
            "stop, or give another hydra.run.dir"
        ) from None
    return descriptor


def check_machine(run: Run) -> None:
    """What this machine allows the run's settings: its cores and its GPUs."""
    threads, cores = run.threads, len(os.sched_getaffinity(0))
    if threads != "auto" and threads > cores:
        allowed = f"auto or an integer from 1 to {cores} (the cores this process may use)"
        raise refusal("threads", threads, allowed)
    device = resolve_device(run.agent.device)
    if run.replay.device != "cpu":
        # The replay's frames may sit on the learner's GPU, where its batches are gathered.
        replay_device = None
        with contextlib.suppress(ValueError):  # not a device name, or no such GPU
            replay_device = resolve_device(run.replay.device)
        if device.type != "cuda" or replay_device != device:
            raise refusal("replay.device", run.replay.device, DEVICE.allowed)
    check_pipelined(run.agent.pipelined, device)


def check_memory(run: Run) -> None:
    """A full replay must fit in what this process can still be given (`available_memory`:
    the machine's memory, and the limits set on the process, `ulimit -v` and its memory
    cgroups' such as SLURM's `--mem` or a container's), or a one-line ValueError naming the
    limit that applies."""
    needed, (available, limit) = replay_bytes(run), available_memory()
    if needed > available:
        raise ValueError(
            f"replay.capacity={run.replay.capacity} is not allowed: a full replay needs "
            f"{size_text(needed)} and this machine has {size_text(available)} available"
            f"{limit}"
        )


def replay_bytes(run: Run) -> int:
    """What a full replay of the config occupies in memory, and about what a checkpoint of
    it occupies on disk (its frames, and the per-slot arrays in the state file)."""
    frames_per_slot = STORAGES[run.replay.eviction].frames_per_slot(run.agent.history_length)
    frame_shape = environment_kind(run.env.kind).frame_shape(run.env)
    return memory_bytes(run.replay.capacity, frame_shape, frames_per_slot)


# A state file holds the agent's networks and optimizer: the online and target networks and
# the two statistics of centered RMSProp, each the size of the network. A run's snapshots:
# agent_latest.pt and agent_best.pt (a network each) and agent_final.pt (all four).
STATE_NETWORKS, SNAPSHOT_NETWORKS = 4, 6
# The most actions a game has (ALE's full action set): a network's largest head.
MOST_ACTIONS = 18


def run_disk_bytes(run: Run, checkpoints: int | None = None) -> int:
    """About what a run's files occupy at most: `checkpoints` checkpoints (each a copy of the
    replay and a state file, whose networks dominate at small capacities; `checkpoint.keep`
    while it runs, one once it has finished) and its snapshots."""
    env = environment_kind(run.env.kind)
    with torch.device("meta"):  # one copy of the network, built without memory
        network = build_network(
            run.agent.network, MOST_ACTIONS, run.agent.history_length, env.frame_shape(run.env)
        )
    networks = sum(p.numel() * p.element_size() for p in network.parameters())
    state = replay_bytes(run) + STATE_NETWORKS * networks
    kept = run.checkpoint.keep if checkpoints is None else checkpoints
    return kept * state + SNAPSHOT_NETWORKS * networks


def disk_needs(run: Run, checkpoints: Path) -> tuple[int, int, Path]:
    """What the run's files need on the disk of `checkpoints` beyond what its checkpoints
    already occupy (they overwrite it): while it runs and once it has finished
    (`run_disk_bytes`); and the nearest directory of that disk that exists."""
    # What the files occupy, not their length: a frame copy is sparse until the ring fills.
    files = checkpoints.iterdir() if checkpoints.is_dir() else ()
    existing = sum(path.stat().st_blocks * 512 for path in files)
    place = next(path for path in (checkpoints, *checkpoints.parents) if path.exists())
    running, finished = (run_disk_bytes(run, kept) - existing for kept in (None, 1))
    return max(0, running), max(0, finished), place


def check_disk(run: Run, checkpoints: Path) -> None:
    """The run's files (`run_disk_bytes`) must fit on the disk of `checkpoints` (beside what
    its checkpoints already occupy, which they overwrite), before the first of them is due."""
    needed, _, place = disk_needs(run, checkpoints)
    free = shutil.disk_usage(place).free
    if needed > free:
        raise ValueError(
            f"checkpoint.keep={run.checkpoint.keep} is not allowed here: {run.checkpoint.keep} "
            f"checkpoints of replay.capacity={run.replay.capacity} and the agent's snapshots "
            f"need {size_text(needed)} more and {place} has {size_text(free)} free (lower "
            "either, or give hydra.run.dir on a larger disk)"
        )
