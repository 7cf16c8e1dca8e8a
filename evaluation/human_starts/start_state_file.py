"""Start-state files for the human-starts protocol (docs/evaluation.md, "Start states"), and
entering a start point (`restore_start`). An ``.npz`` read with ``allow_pickle=False``, whose
variable-length bytes (ALE states, action streams) are one uint8 blob and len + 1 offsets, and
whose ``metadata`` is JSON. A state restores only in the ROM and ale-py that saved it, so a file
made with others is refused."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import ale_py
import numpy as np

from artifacts.atomic import write_atomically
from artifacts.header import Header
from envs.games import resolve_game
from evaluation.human_starts.trajectories import rom_md5

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
# The metadata fields that are fields of `StartStates` as they are.
METADATA = ("game", "rom_md5", "ale_py_version", "frame_skip", "screen_size", "history_length")
BLOBS = ("state_bytes", "state_offsets", "action_bytes", "action_offsets")


@dataclass(frozen=True)
class StartStates:
    """N start points of one game, from T trajectories."""

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
    rams: np.ndarray
    trajectory_seeds: np.ndarray
    trajectory_actions: tuple[bytes, ...]  # per emulator frame, one bytes per trajectory

    def __len__(self) -> int:
        return len(self.states)

    def actions(self, trajectory: int) -> np.ndarray:
        """The ALE action id of every emulator frame of ``trajectory``, from its reset on."""
        return np.frombuffer(self.trajectory_actions[trajectory], dtype=np.uint8)

    def first(self, count: int) -> StartStates:
        """The first ``count`` start points (for a quick look; the protocol uses all 100)."""
        arrays = {name: getattr(self, name)[:count] for name in ARRAYS}
        return dataclasses.replace(self, states=self.states[:count], **arrays)


def restore_start(ale: ale_py.ALEInterface, starts: StartStates, index: int) -> None:
    """Put an emulator just ``reset()`` into start point ``index`` (frame k), or raise ValueError
    when its frame number or RAM is not the stored one.

    ale-py's serialized state leaves part of the emulator out (the TIA's drawing state among
    others), which keeps what the restoring emulator last did: so play one NOOP frame, restore
    the state of frame k - 1 and play frame k with the prefix's own action, which makes the
    left-out part this game's (docs/evaluation.md, restore fidelity).
    """
    frame = int(starts.episode_frames[index])
    if frame > 1:
        ale.act(0)  # ALE action 0 is NOOP in every game
    ale.restoreState(ale_py.ALEState(starts.states[index]))
    if frame > 0:
        trajectory = int(starts.trajectory_indices[index])
        ale.act(int(starts.actions(trajectory)[frame - 1]))
    if ale.getEpisodeFrameNumber() != frame or not np.array_equal(ale.getRAM(), starts.rams[index]):
        raise ValueError(
            f"start point {index} did not restore (frame number {ale.getEpisodeFrameNumber()} "
            f"instead of {frame}, or another RAM)"
        )


def file_arrays(starts: StartStates) -> dict[str, np.ndarray]:
    """The arrays a start-state file stores for ``starts``: all of it but the metadata."""
    return {
        **{name: np.asarray(getattr(starts, name), dtype) for name, (dtype, _) in ARRAYS.items()},
        **to_blob("state", starts.states),
        **to_blob("action", starts.trajectory_actions),
        "trajectory_seeds": np.asarray(starts.trajectory_seeds, dtype=np.int64),
    }


def save_start_states(path: str | os.PathLike, starts: StartStates) -> None:
    arrays = file_arrays(starts)
    metadata = {
        **START_STATES.fields(),
        **{key: getattr(starts, key) for key in METADATA},
        "trajectory_sources": list(starts.trajectory_sources),
        "sha256": digest(arrays),
    }
    arrays["metadata"] = np.array(json.dumps(metadata))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    write_atomically(path, buffer.getbuffer())


def load_start_states(path: str | os.PathLike, game: str | None = None) -> StartStates:
    """Read and check a start-state file; ``game`` (any accepted name) must match if given.
    A one-line ValueError for anything that is not this version's file of the installed ROM and
    ale-py."""
    path = Path(path)
    arrays, metadata = read_npz(path)
    check_compatible(path, metadata, game)
    if metadata.get("sha256") != digest(arrays):
        raise ValueError(
            f"start-state file {path} is corrupt: its content does not match its checksum"
        )
    check_shapes(path, arrays, metadata)
    return StartStates(
        **{key: metadata[key] for key in METADATA},
        states=_split(arrays, "state"),
        trajectory_sources=tuple(metadata["trajectory_sources"]),
        trajectory_seeds=arrays["trajectory_seeds"],
        trajectory_actions=_split(arrays, "action"),
        **{name: arrays[name] for name in ARRAYS},
    )


def to_blob(name: str, items: tuple[bytes, ...]) -> dict[str, np.ndarray]:
    """Variable-length byte strings as one uint8 array and their len + 1 offsets."""
    offsets = np.cumsum([0] + [len(item) for item in items], dtype=np.int64)
    return {
        f"{name}_bytes": np.frombuffer(b"".join(items), dtype=np.uint8),
        f"{name}_offsets": offsets,
    }


def _split(arrays: dict[str, np.ndarray], name: str) -> tuple[bytes, ...]:
    blob, offsets = arrays[f"{name}_bytes"].tobytes(), arrays[f"{name}_offsets"]
    return tuple(blob[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1))


def read_npz(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and the metadata of a start-state file of this version, all arrays present."""
    if not path.is_file():
        raise ValueError(f"start-state file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        metadata = json.loads(str(arrays.pop("metadata")))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        # np.load and zipfile raise these for truncated, flipped or foreign bytes. Not their
        # text: for pickled content numpy advises loading it with allow_pickle=True.
        raise ValueError(
            f"start-state file {path} is corrupt or not a start-state file ({type(error).__name__})"
        ) from None
    START_STATES.check(
        path,
        metadata,
        remedy=f"regenerate it with python -m evaluation.human_starts sample TRAJECTORIES.json "
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
