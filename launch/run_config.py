"""The config a run runs with, and its record in the run directory (Hydra's side of train.py).

A resumed run keeps its stored config, except the settings in `CHANGEABLE_ON_RESUME`
(`training.run_record`, which also checks config.yaml against the checkpoint); a new
run in an existing directory must have the same one, with the same exception; config.yaml is
written only once the run is built, so a command that fails leaves no record of a run that
never started, and it keeps the values the run started with.
"""

import ctypes
import os
import struct
import time
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from artifacts.atomic import write_atomically
from artifacts.provenance import read_starts, this_start, with_start
from artifacts.run_directory import RunDirectory, read_config_file
from artifacts.upgrade import upgrade_config
from launch.run_guard import RunDirectoryError
from launch.validation import check_disk, check_replay_group, validate_config
from schema import shown
from training.checkpoints import CheckpointStore
from training.run_record import CHANGEABLE_ON_RESUME, config_record, differences
from training.settings import Run

# Hydra creates the run directory before `main` runs; see `remove_created_directories`. Read
# from the clock file systems stamp new directories with (Linux's CLOCK_REALTIME_COARSE, up to
# a tick behind the precise one): one made right after this would otherwise look older.
_CLOCK_REALTIME_COARSE = 5
_STARTED_NS = time.clock_gettime_ns(_CLOCK_REALTIME_COARSE)


def load_stored_config(path: Path) -> DictConfig:
    """A run's config.yaml as this version writes it (`artifacts.upgrade`); a one-line
    ValueError where it cannot be read, is not YAML, or holds no settings (empty)."""
    stored = read_config_file(path)
    if stored is None or stored == {}:
        raise ValueError(f"run config {path} is empty: it holds no settings")
    if not isinstance(stored, dict):
        raise ValueError(
            f"run config {path} holds a {type(stored).__name__}, not the run's settings"
        )
    return OmegaConf.create(upgrade_config(stored))


def check_run_directory(run_dir: Path, cfg: DictConfig) -> None:
    """A run directory that holds a run must hold this config's (`record_run_config` writes
    it once the run is built)."""
    path = RunDirectory(run_dir).config_file
    if not path.exists():
        return
    existing = OmegaConf.to_container(load_stored_config(path))
    existing.pop("resume", None)
    found = differences(existing, config_record(cfg))
    for key in CHANGEABLE_ON_RESUME:
        found.pop(key, None)
    if found:
        key, (there, here) = next(iter(found.items()))
        raise RunDirectoryError(
            f"run directory {run_dir} holds a different run: {key} is {shown(there)} there, "
            f"{shown(here)} here"
        )


def _plain(value):
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def run_config(cfg: DictConfig) -> DictConfig:
    """The config to run: `cfg`, or with `resume` the resumed run's own, which every
    command-line override must agree with."""
    if cfg.resume is None:
        return cfg
    path = RunDirectory(Path(cfg.resume)).config_file
    if not path.is_file():
        raise RunDirectoryError(f"resume={cfg.resume} is not a run directory: no {path.name}")
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if run_dir.resolve() != path.parent.resolve():
        raise RunDirectoryError(
            f"resume={cfg.resume} with hydra.run.dir={run_dir} is not allowed: a resumed run "
            "continues in its own directory"
        )
    stored = load_stored_config(path)
    for override in HydraConfig.get().overrides.task:
        key = override.split("=", 1)[0].lstrip("+~")
        if key == "resume" or key.startswith("hydra"):
            continue
        if key in CHANGEABLE_ON_RESUME:
            OmegaConf.update(stored, key, OmegaConf.select(cfg, key))
            continue
        there, here = (_plain(OmegaConf.select(c, key)) for c in (stored, cfg))
        if there != here:
            raise RunDirectoryError(
                f"resume={cfg.resume}: the run has {key}={shown(there)}; a resumed run keeps its "
                "config"
            )
    stored.resume = cfg.resume
    return stored


def record_run_config(run_dir: Path, cfg: DictConfig) -> None:
    """Write the run's record, config.yaml, unless it is there: only for a run that starts."""
    path = RunDirectory(run_dir).config_file
    if not path.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(path, OmegaConf.to_yaml(config_record(cfg)).encode())


def record_start(run_dir: Path, step: int) -> None:
    """Add this start of the run, at agent step `step` (its first, 0, or the checkpoint it
    resumed from), to its provenance.yaml: the code's commit, the libraries' versions
    (`artifacts.provenance`). Only once the run has started: a refused resume leaves the
    file as it was."""
    path = RunDirectory(run_dir).provenance_file
    write_atomically(path, with_start(read_starts(path), this_start(step)).encode())


def remove_created_directories(run_dir: Path) -> None:
    """Undo Hydra's `mkdir -p` of the run directory for a refused run: remove it and then its
    parents while they are empty and this process created them, up to the working directory.
    A directory made before the command stays, empty or not."""
    run_dir = run_dir.absolute()
    directory, working = run_dir, Path.cwd()
    while directory != directory.parent and not working.is_relative_to(directory):
        try:
            if not _created_by_this_process(directory, run_dir) or any(directory.iterdir()):
                return
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def _created_by_this_process(directory: Path, run_dir: Path) -> bool:
    """Whether `directory` was created after this process started, by its creation time. A
    parent's modification time cannot tell: creating the run directory in it changed that.
    Where the file system keeps no creation time, the run directory's modification time
    stands in for it (a refused run writes nothing into it), and a parent is kept."""
    created = _creation_ns(directory)
    if created is None and directory == run_dir:
        created = directory.stat().st_mtime_ns
    return created is not None and created >= _STARTED_NS


# statx(2): <fcntl.h>'s AT_FDCWD, <linux/stat.h>'s STATX_BTIME and the offset of stx_btime
# (tv_sec: int64, tv_nsec: uint32) in struct statx, 256 bytes in all.
_AT_FDCWD, _STATX_BTIME, _BTIME_OFFSET, _STATX_BYTES = -100, 0x800, 80, 256


def _creation_ns(path: Path) -> int | None:
    """When `path` was created (statx's birth time; Python's os.stat does not give it on
    Linux), or None where the C library or the file system does not keep it."""
    try:
        statx = ctypes.CDLL(None, use_errno=True).statx
    except AttributeError:
        return None
    buffer = ctypes.create_string_buffer(_STATX_BYTES)
    if statx(_AT_FDCWD, os.fsencode(path), 0, _STATX_BTIME, buffer) != 0:
        return None
    (mask,) = struct.unpack_from("I", buffer, 0)
    if not mask & _STATX_BTIME:
        return None
    seconds, nanoseconds = struct.unpack_from("qI", buffer, _BTIME_OFFSET)
    return seconds * 1_000_000_000 + nanoseconds


def check_run(
    cfg: DictConfig, run_dir: Path, replay_group: str | None, this_machine: bool = True
) -> tuple[Run, bool]:
    """Every check of a run's config before anything is built, in train.py and, for each job,
    before a sweep starts: the replay group of a fresh run (first: with another group's kind
    its settings are another sampler's), the settings, the game (resolved to its id in
    `cfg`), the run directory and, for a run that will run on this machine and is not
    finished, the disk its checkpoints need. Returns the run's settings and whether the run
    is finished (its final snapshot written at its last step): resuming it would only
    rewrite its results. A refusal is a one-line ValueError."""
    if cfg.resume is None:
        check_replay_group(cfg, replay_group)
    settings = validate_config(cfg, this_machine)
    cfg.env.game = settings.env.game  # the stored config names the game by its id too
    check_run_directory(run_dir, cfg)
    run = RunDirectory(run_dir)
    done = run.final_snapshot.is_file() and CheckpointStore(run.checkpoints).latest_step() == (
        cfg.train.total_steps
    )
    if this_machine and not done:
        check_disk(settings, run.checkpoints)
    return settings, done
