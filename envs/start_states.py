"""Start states for the human-starts protocol: the file format, and sampling from human play.

DeepMind's human start points were never published, so users make and share their own. A
start-state file (``.npz``, ``numpy.savez_compressed``, loaded with ``allow_pickle=False``: no
pickles anywhere) holds, for N start points:

* ``state_bytes`` / ``state_offsets``: the ALE states (``ale.cloneState().serialize()``), as one
  uint8 blob and N + 1 offsets; state i is restored with ``ALEState(blob[o[i]:o[i + 1]])``;
* ``frames``: uint8 (N, history_length, screen_size, screen_size), the agent's acting state at
  the start point, built with the rule of ``make_env`` + ``FrameStack`` (see
  ``envs.trajectories.agent_frames``): an emulator state does not hold past screens;
* ``screens``: uint8 (N, 210, 160, 3), the RGB screen at the start point (to look at);
* ``episode_frames``: int64 (N,), ALE's episode frame number at the start point (the prefix);
* ``prefix_scores``: float64 (N,), what the human had scored by then (informational only);
* ``trajectory_indices``, ``trajectory_frames``: int64 (N,), where each start came from;
* ``metadata``: a JSON string with format, version, game (ROM id), rom_md5, ale_py_version,
  frame_skip, screen_size, history_length, the trajectory sources and a SHA-256 of the arrays.

A file is refused, with one line, when its game, ROM checksum or ale-py version differ from the
ones asked for / installed (a state restored into another emulator build is undefined), or when
its content does not match its checksum.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import ale_py
import numpy as np

from envs.games import resolve_game

FORMAT = "per-atari-start-states"
VERSION = 1
_ARRAYS = {  # name -> (dtype, shape after the leading N; None = checked separately)
    "frames": (np.uint8, None),
    "screens": (np.uint8, (210, 160, 3)),
    "episode_frames": (np.int64, ()),
    "prefix_scores": (np.float64, ()),
    "trajectory_indices": (np.int64, ()),
    "trajectory_frames": (np.int64, ()),
}


@functools.cache
def rom_md5(game: str) -> str:
    """MD5 of the installed ROM of ``game`` (the checksum ale-py itself verifies)."""
    rom_id = resolve_game(game).rom_id
    return hashlib.md5(Path(ale_py.roms.get_rom_path(rom_id)).read_bytes()).hexdigest()


@dataclass(frozen=True)
class StartStates:
    """N start points of one game; see the module docstring for each field's meaning."""

    game: str
    rom_md5: str
    ale_py_version: str
    frame_skip: int
    screen_size: int
    history_length: int
    states: tuple[bytes, ...]
    frames: np.ndarray
    screens: np.ndarray
    episode_frames: np.ndarray
    prefix_scores: np.ndarray
    trajectory_indices: np.ndarray
    trajectory_frames: np.ndarray
    trajectory_sources: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.states)

    def ale_state(self, index: int) -> ale_py.ALEState:
        return ale_py.ALEState(self.states[index])

    def first(self, count: int) -> StartStates:
        """The first ``count`` start points (for a quick look; the protocol uses all 100)."""
        arrays = {name: getattr(self, name)[:count] for name in _ARRAYS}
        return dataclasses.replace(self, states=self.states[:count], **arrays)


def save_start_states(path: str | os.PathLike, starts: StartStates) -> None:
    """Write ``starts`` to ``path`` (.npz) atomically."""
    path = Path(path)
    offsets = np.cumsum([0] + [len(s) for s in starts.states], dtype=np.int64)
    arrays = {
        name: np.asarray(getattr(starts, name), dtype=dtype) for name, (dtype, _) in _ARRAYS.items()
    }
    arrays["state_bytes"] = np.frombuffer(b"".join(starts.states), dtype=np.uint8)
    arrays["state_offsets"] = offsets
    metadata = {
        "format": FORMAT,
        "version": VERSION,
        "game": starts.game,
        "rom_md5": starts.rom_md5,
        "ale_py_version": starts.ale_py_version,
        "frame_skip": starts.frame_skip,
        "screen_size": starts.screen_size,
        "history_length": starts.history_length,
        "trajectory_sources": list(starts.trajectory_sources),
        "sha256": _digest(arrays),
    }
    arrays["metadata"] = np.array(json.dumps(metadata))
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".npz", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez_compressed(file, **arrays)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; a result is for sharing
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_start_states(path: str | os.PathLike, game: str | None = None) -> StartStates:
    """Read and check a start-state file; ``game`` (any accepted name) must match if given.

    Raises a one-line ValueError for a missing, corrupt or foreign file, another game, another
    ROM (by MD5) or another ale-py version than the installed one.
    """
    path = Path(path)
    arrays, metadata = _read_npz(path)
    _check_compatible(path, metadata, game)
    count = len(arrays["state_offsets"]) - 1
    expected_frames = (metadata["history_length"], metadata["screen_size"], metadata["screen_size"])
    for name, (dtype, shape) in _ARRAYS.items():
        shape = expected_frames if shape is None else shape
        array = arrays[name]
        if array.dtype != dtype or array.shape != (count, *shape):
            raise ValueError(
                f"start-state file {path} is corrupt: array {name!r} has the wrong "
                f"shape or type {array.dtype} {array.shape}"
            )
    if metadata.get("sha256") != _digest(arrays):
        raise ValueError(
            f"start-state file {path} is corrupt: its content does not match its checksum"
        )
    blob, offsets = arrays["state_bytes"].tobytes(), arrays["state_offsets"]
    return StartStates(
        game=metadata["game"],
        rom_md5=metadata["rom_md5"],
        ale_py_version=metadata["ale_py_version"],
        frame_skip=metadata["frame_skip"],
        screen_size=metadata["screen_size"],
        history_length=metadata["history_length"],
        states=tuple(blob[offsets[i] : offsets[i + 1]] for i in range(count)),
        trajectory_sources=tuple(metadata["trajectory_sources"]),
        **{name: arrays[name] for name in _ARRAYS},
    )


def _read_npz(path: Path) -> tuple[dict[str, np.ndarray], dict]:
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
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise ValueError(f"{path} is not a start-state file (format must be {FORMAT!r})")
    if metadata.get("version") != VERSION:
        raise ValueError(
            f"start-state file {path} has version {metadata.get('version')!r}; "
            f"this code reads version {VERSION}"
        )
    missing = sorted({*_ARRAYS, "state_bytes", "state_offsets"} - set(arrays))
    if missing:
        raise ValueError(f"start-state file {path} is corrupt: missing arrays {missing}")
    return arrays, metadata


def _check_compatible(path: Path, metadata: dict, game: str | None) -> None:
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


def _digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every array's name, dtype, shape and bytes, in a fixed order."""
    digest = hashlib.sha256()
    for name in sorted(set(arrays) - {"metadata"}):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
