"""Checks that keep train.py from starting where it cannot finish, or where another process is
already running: before Hydra creates anything, and once the run directory exists."""

import ctypes
import fcntl
import os
from pathlib import Path

from omegaconf.errors import OmegaConfBaseException

from artifacts.command_line import unwritable_reason
from artifacts.run_directory import RunDirectory

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
