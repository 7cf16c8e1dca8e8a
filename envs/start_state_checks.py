"""What a start-state file must hold, and the checks that refuse one that does not.

The layout itself is described in ``envs.start_state_file``, which reads and writes the files;
this module holds the names, types and shapes of its arrays, the installed ROM's checksum and
the one-line refusals: a damaged, foreign or older file, or one made for another game, ROM or
ale-py version (a state restored into another emulator build is undefined).
"""

from __future__ import annotations

import functools
import hashlib
import json
import zipfile
from pathlib import Path

import ale_py
import numpy as np

from artifacts.header import Header
from envs.games import resolve_game

# Version 2 stores the action prefixes and RAM that verify each restore.
START_STATES = Header("per-atari-start-states", 2, "start-state file")
RAM_SIZE = 128
ARRAYS = {  # name -> (dtype, shape after the leading N; None = checked separately)
    "frames": (np.uint8, None),
    "rams": (np.uint8, (RAM_SIZE,)),
    "screens": (np.uint8, (210, 160, 3)),
    "episode_frames": (np.int64, ()),
    "prefix_scores": (np.float64, ()),
    "trajectory_indices": (np.int64, ()),
    "trajectory_frames": (np.int64, ()),
}
BLOBS = ("state_bytes", "state_offsets", "action_bytes", "action_offsets")


@functools.cache
def rom_md5(game: str) -> str:
    """MD5 of the installed ROM of ``game`` (the checksum ale-py itself verifies)."""
    rom_id = resolve_game(game).rom_id
    return hashlib.md5(Path(ale_py.roms.get_rom_path(rom_id)).read_bytes()).hexdigest()


def read_npz(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and the metadata of a start-state file of this version, all arrays present."""
    if not path.is_file():
        raise ValueError(f"start-state file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        metadata = json.loads(str(arrays.pop("metadata")))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        # np.load and zipfile raise these for truncated, flipped or foreign bytes.
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(
            f"start-state file {path} is corrupt or not an .npz file: {reason}"
        ) from None
    START_STATES.check(
        path,
        metadata,
        remedy=f"regenerate it with python -m evaluation.start_states sample TRAJECTORIES.json "
        f"out={path}",
    )
    missing = sorted({*ARRAYS, *BLOBS, "trajectory_seeds"} - set(arrays))
    if missing:
        raise ValueError(f"start-state file {path} is corrupt: missing arrays {missing}")
    return arrays, metadata


def check_shapes(path: Path, arrays: dict[str, np.ndarray], metadata: dict) -> None:
    """Every array has its type and shape, and every start point's prefix exists."""
    count = len(arrays["state_offsets"]) - 1
    trajectories = len(metadata["trajectory_sources"])
    expected_frames = (metadata["history_length"], metadata["screen_size"], metadata["screen_size"])
    wanted = {
        name: (dtype, (count, *(expected_frames if shape is None else shape)))
        for name, (dtype, shape) in ARRAYS.items()
    }
    wanted["trajectory_seeds"] = (np.int64, (trajectories,))
    wanted["action_offsets"] = (np.int64, (trajectories + 1,))
    wanted["state_offsets"] = (np.int64, (count + 1,))
    for name, (dtype, shape) in wanted.items():
        if arrays[name].dtype != dtype or arrays[name].shape != shape:
            raise ValueError(
                f"start-state file {path} is corrupt: array {name!r} has the wrong shape or "
                f"type {arrays[name].dtype} {arrays[name].shape}"
            )
    for name in ("state", "action"):
        offsets, blob = arrays[f"{name}_offsets"], arrays[f"{name}_bytes"]
        if offsets[0] != 0 or offsets[-1] != blob.size or (np.diff(offsets) < 0).any():
            raise ValueError(f"start-state file {path} is corrupt: bad {name}_offsets")
    owners, frames = arrays["trajectory_indices"], arrays["trajectory_frames"]
    if ((owners < 0) | (owners >= trajectories)).any():
        raise ValueError(f"start-state file {path} is corrupt: a start names no trajectory")
    if not np.array_equal(frames, arrays["episode_frames"]):  # trajectories begin at a reset
        raise ValueError(f"start-state file {path} is corrupt: frame numbers disagree")
    if (frames < 0).any() or (frames > np.diff(arrays["action_offsets"])[owners]).any():
        raise ValueError(
            f"start-state file {path} is corrupt: a start point lies outside its trajectory"
        )


def check_compatible(path: Path, metadata: dict, game: str | None) -> None:
    """Same game, same ROM bytes, same emulator build: otherwise a state means nothing."""
    recorded = metadata.get("game")
    try:
        recorded = resolve_game(str(recorded)).rom_id
    except ValueError:
        raise ValueError(f"start-state file {path} names an unknown game {recorded!r}") from None
    if game is not None and recorded != resolve_game(game).rom_id:
        raise ValueError(
            f"start-state file {path} is for game {recorded!r}, not {resolve_game(game).rom_id!r}"
        )
    installed_md5 = rom_md5(recorded)
    if metadata.get("rom_md5") != installed_md5:
        raise ValueError(
            f"start-state file {path} was made with a {recorded} ROM of MD5 "
            f"{metadata.get('rom_md5')}, the installed ROM has MD5 {installed_md5}"
        )
    if metadata.get("ale_py_version") != ale_py.__version__:
        raise ValueError(
            f"start-state file {path} was made with ale-py "
            f"{metadata.get('ale_py_version')}, this is ale-py {ale_py.__version__}; "
            "ALE states only restore in the version that saved them"
        )


def digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every array's name, dtype, shape and bytes, in a fixed order."""
    sha = hashlib.sha256()
    for name in sorted(set(arrays) - {"metadata"}):
        array = np.ascontiguousarray(arrays[name])
        sha.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        sha.update(array.tobytes())
    return sha.hexdigest()
