"""What every command line shares: a bad argument is one line and exit status 2, and an
output location and the memory the work needs are checked before any work starts."""

import argparse
import os
import sys
from pathlib import Path


def say(line: str) -> None:
    """`line` on stderr in one write: the jobs of a local sweep share their stderr, where a line
    written in pieces (print's text, then its newline) interleaves with another job's."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is `error: ...` on one line (no usage block), status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message}\n")


def unwritable_reason(directory: Path) -> str | None:
    """Why `directory` cannot be created or written into, or None if it can."""
    if directory.exists() and not directory.is_dir():
        return f"{directory} is a file, not a directory"
    ancestor = directory.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is a file, so {directory} cannot be created"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{ancestor} is not writable"
    return None


def available_memory_bytes() -> int:
    """Memory the system can give this process without swapping (Linux: MemAvailable)."""
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


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
