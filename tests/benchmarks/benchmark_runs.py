"""A benchmark script run as a user runs it, for the tests of its output."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(script: str, *arguments: str) -> subprocess.CompletedProcess:
    """`python benchmarks/SCRIPT ARGUMENTS...` from the repository's root, its output kept."""
    command = [sys.executable, str(ROOT / "benchmarks" / script), *arguments]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
