"""Checks that keep train.py from starting where it cannot finish, or where another process is
already running: before Hydra creates anything, once the run directory exists, and what the
machine must give a run whose settings are valid (its cores, GPUs and memory)."""

import ctypes
import fcntl
import os
from pathlib import Path

import torch
from omegaconf.errors import OmegaConfBaseException

from agents.devices import check_pipelined, resolve_device
from artifacts.command_line import available_memory, unwritable_reason
from artifacts.run_directory import RunDirectory
from launch.validation import replay_bytes
from replay.registry import REPLAY_DEVICES
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
    if run.replay.device != "cpu" and not _learners_cuda_device(run.replay.device, device):
        raise refusal("replay.device", run.replay.device, REPLAY_DEVICES)
    check_pipelined(run.agent.pipelined, device)


def _learners_cuda_device(name: str, learners: torch.device) -> bool:
    """The replay's frames may sit on the learner's GPU, where its batches are gathered."""
    try:
        device = resolve_device(name)
    except ValueError:  # not a device name, or no such GPU
        return False
    return device.type == "cuda" and device == learners


def check_memory(run: Run) -> None:
    """A full replay must fit in what this process can still be given (`available_memory`:
    the machine's memory, and the limits set on the process, `ulimit -v` and its memory
    cgroups' such as SLURM's `--mem` or a container's), or a one-line ValueError naming the
    limit that applies."""
    needed, (available, limit) = replay_bytes(run), available_memory()
    if needed > available:
        raise ValueError(
            f"replay.capacity={run.replay.capacity} is not allowed: a full replay needs "
            f"{needed / 1e9:.1f} GB and this machine has {available / 1e9:.1f} GB available"
            f"{limit}"
        )
