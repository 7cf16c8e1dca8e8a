"""Every test that composes configs/ with Hydra's compose API finds the schemas' defaults the
config files build on, as train.py stores them before Hydra composes; a file system of a
test's own, to fill or make read-only."""

import os
import subprocess
from pathlib import Path

import pytest

from launch.config_defaults import register_defaults

register_defaults()


@pytest.fixture
def small_file_system(tmp_path):
    """`mount(size)`: a directory on a tmpfs of its own of `size` bytes, mounted (by root,
    as CI runs) for the test, to fill or to remount read-only; unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    mounted = []

    def mount(size: int) -> Path:
        directory = tmp_path / f"mount{len(mounted)}"
        directory.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", directory], check=True
        )
        mounted.append(directory)
        return directory

    yield mount
    for directory in mounted:
        subprocess.run(["umount", directory], check=True)
