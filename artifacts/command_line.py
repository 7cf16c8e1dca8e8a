"""What every command line shares: a bad argument is one line and exit status 2, and an
output location and the memory the work needs are checked before any work starts."""

import argparse
import os
import resource
import shutil
import sys
from pathlib import Path

PROC, CGROUPS = Path("/proc"), Path("/sys/fs/cgroup")


def say(line: str) -> None:
    """`line` on stderr in one write: the jobs of a local sweep share their stderr, where a line
    written in pieces (print's text, then its newline) interleaves with another job's."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is `error: ...` on one line (no usage block), status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message}\n")


def unwritable_reason(directory: Path, needed: int = 0) -> str | None:
    """Why `directory` cannot be created or written into, or hold `needed` bytes more, or None."""
    if directory.exists() and not directory.is_dir():
        return f"{directory} is a file, not a directory"
    ancestor = directory.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is a file, so {directory} cannot be created"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{ancestor} is not writable"
    free = shutil.disk_usage(ancestor).free
    if free < needed:
        return f"the disk of {ancestor} has {free:,} bytes free, and about {needed:,} are needed"
    return None


def available_memory(proc: Path = PROC, cgroups: Path = CGROUPS) -> tuple[int, str]:
    """The memory this process can still be given without swapping, and the limit that sets it
    ("" for the machine's): the least of MemAvailable, what `ulimit -v` leaves, and what each
    memory cgroup it lies in leaves (SLURM's `--mem`, a container's; v1 and v2)."""
    try:
        machine = kernel_bytes(proc / "meminfo", "MemAvailable")
    except (OSError, KeyError, ValueError):
        machine = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limits = [(machine, ""), *_address_space_left(proc), *_cgroups_left(proc, cgroups)]
    return min(limits, key=lambda limit: limit[0])


def kernel_bytes(path: Path, key: str) -> int:
    """The bytes of a `key:  N kB` line of /proc's meminfo or status."""
    fields = dict(line.split(":", 1) for line in path.read_text().splitlines())
    return int(fields[key].split()[0]) * 1024


def size_text(count: int) -> str:
    return f"{count / 1e9:.1f} GB" if abs(count) >= 10**8 else f"{count / 1e6:.1f} MB"


def _address_space_left(proc: Path) -> list[tuple[int, str]]:
    """What `ulimit -v` (RLIMIT_AS) leaves beyond what this process has mapped already."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return []
    try:
        mapped = kernel_bytes(proc / "self/status", "VmSize")
    except (OSError, KeyError, ValueError):
        mapped = 0
    why = f" under this process's address-space limit (ulimit -v: {size_text(limit)})"
    return [(max(0, limit - mapped), why)]


# A memory cgroup's files (the limit, the usage, and memory.stat's page cache it can reclaim)
# and where each version's hierarchy is mounted below CGROUPS.
CGROUP_FILES = {
    2: ("", ("memory.max", "memory.current", "inactive_file")),
    1: ("memory", ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")),
}


def _cgroups_left(proc: Path, cgroups: Path) -> list[tuple[int, str]]:
    """What this process's memory cgroup, and each one above it, leaves under its limit; a path
    missing below the mount (a container without a cgroup namespace) is passed over."""
    try:
        lines = (proc / "self/cgroup").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        version = 2 if controllers == "" else 1 if "memory" in controllers.split(",") else None
        if version is None:
            continue
        mount, names = CGROUP_FILES[version]
        mount = cgroups / mount
        directory = mount / path.lstrip("/")
        levels = [directory, *(d for d in directory.parents if d.is_relative_to(mount))]
        found += filter(None, (_cgroup_left(level, *names) for level in levels))
    return found


def _cgroup_left(directory: Path, limit_file: str, usage_file: str, reclaimable: str):
    """(what the cgroup at `directory` leaves under its limit, why), or None without a limit."""
    try:
        limit = int((directory / limit_file).read_text())
        usage = int((directory / usage_file).read_text())
        stat = dict(line.split() for line in (directory / "memory.stat").read_text().splitlines())
        cache = int(stat.get(reclaimable, 0))
    except (OSError, ValueError):
        return None
    why = (
        f" under this process's memory cgroup limit ({size_text(limit)}: {directory / limit_file})"
    )
    return max(0, limit - usage + cache), why


def output_directory(text: str) -> Path:
    """argparse type: a directory that can be created or written into."""
    reason = unwritable_reason(Path(text))
    if reason is not None:
        raise argparse.ArgumentTypeError(f"{text} cannot be used: {reason}")
    return Path(text)


def at_least(minimum, kind=int, strict: bool = False):
    """argparse type: a number of `kind` that is at least `minimum` (above it if `strict`)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text} is not {kind.__name__}") from None
        if not (value > minimum if strict else value >= minimum):
            relation = ">" if strict else ">="
            raise argparse.ArgumentTypeError(f"{text} is not allowed: must be {relation} {minimum}")
        return value

    return parse
