"""The up-front check that depends on the disk: what the checkpoints and snapshots need."""

import os
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from launch import run_guard

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")


def config(*overrides: str):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def with_free_disk(monkeypatch, tmp_path, free: int) -> None:
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(run_guard.shutil, "disk_usage", lambda path: usage._replace(free=free))


def test_checkpoints_that_would_not_fit_on_the_disk_are_refused_at_the_start(tmp_path, monkeypatch):
    """Two checkpoints of the paper's 1M-transition replay need 14.4 GB, the networks in their
    state files and the snapshots 0.1 GB."""
    cfg = config()
    with_free_disk(monkeypatch, tmp_path, 10 * 10**9)
    with pytest.raises(ValueError) as error:
        run_guard.check_disk(cfg, tmp_path / "run" / "checkpoints")
    assert str(error.value) == (
        "checkpoint.keep=2 is not allowed here: 2 checkpoints of replay.capacity=1000000 and the "
        f"agent's snapshots need 14.5 GB more and {tmp_path} has 10.0 GB free (lower either, or "
        "give hydra.run.dir on a larger disk)"
    )


def test_earlier_checkpoints_count_by_what_they_occupy_not_by_their_length(tmp_path, monkeypatch):
    """An earlier checkpoint's frame copy is overwritten in place: what it occupies need not
    be free again. Until the ring fills it is sparse, and its length says nothing of that."""
    cfg = config()
    needed = run_guard.run_disk_bytes(cfg)
    with_free_disk(monkeypatch, tmp_path, needed - 2**20)  # 1 MiB short
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    copy = checkpoints / "frames-0.bin"
    with open(copy, "wb") as sparse:
        sparse.truncate(5 * 10**9)
    if copy.stat().st_blocks * 512 >= 2**20:
        pytest.skip("this file system stores no sparse files")
    with pytest.raises(ValueError, match=r"need 14\.5 GB more"):
        run_guard.check_disk(cfg, checkpoints)
    copy.write_bytes(os.urandom(2 * 2**20))  # 2 MiB written: they fit in what it occupies
    run_guard.check_disk(cfg, checkpoints)


def test_at_a_small_capacity_the_state_files_networks_are_what_needs_the_disk(
    tmp_path, monkeypatch
):
    """MinAtar's network is 0.5 MB, its 100 frames 56 kB: two state files hold four copies
    of the network each, and the snapshots six."""
    cfg = config("experiment=minatar_dqn", "replay.capacity=100")
    with_free_disk(monkeypatch, tmp_path, 2 * run_guard.replay_bytes(cfg) + 10**6)
    with pytest.raises(ValueError) as error:
        run_guard.check_disk(cfg, tmp_path / "checkpoints")
    assert str(error.value) == (
        "checkpoint.keep=2 is not allowed here: 2 checkpoints of replay.capacity=100 and the "
        f"agent's snapshots need 7.6 MB more and {tmp_path} has 1.1 MB free (lower either, or "
        "give hydra.run.dir on a larger disk)"
    )
