"""Crash-safe checkpoints of a whole training run, replay memory included.

A checkpoint is a state file (`state-<step>-frames<m>.pt`: networks, optimizer, counters, generators,
sampler, replay metadata — everything but the frames) plus one on-disk copy of the replay's
frames (`frames-<m>.bin`). There are as many frame copies as kept checkpoints; each checkpoint
brings the copy of the oldest one up to date by writing only the slots written since that copy
was last synced, straight from the live array (no second in-memory copy), so a full 7 GB memory
costs a few hundred MB of writes per checkpoint, not 7 GB.

Invariants that make it crash-safe:
- a state file exists only complete: written to a temporary name, fsynced, renamed;
- a state file names its frame copy and the `frames_written` count the copy held when it was
  made, and the copy's sidecar (`frames-<m>.json`) records the count it holds now; they match
  exactly when the copy belongs to that state file. A copy is only rewritten after the state
  file that used it was deleted, and its sidecar is removed before the first byte changes.
So whatever moment a process is killed at, or a write fails at, every state file still present
either loads with its exact frames or is detected as unusable.
"""

import json
import os
import re
from pathlib import Path

import numpy as np
import torch

FORMAT = "per-atari-checkpoint"
VERSION = 1
STATE_FILE = re.compile(r"state-(\d{12})-frames(\d+)\.pt")
_CHUNK_BYTES = 64 << 20


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message names the file."""


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomically(path: Path, write) -> None:
    """Call `write(file)` on a temporary file, fsync it and rename it onto `path`."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with open(temporary, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    _fsync_directory(path.parent)


def to_tensors(value):
    """Nested numpy arrays and bytes become tagged tensors, so `torch.load(weights_only=True)`
    reads them back; tensors stay tensors."""
    if isinstance(value, dict):
        return {key: to_tensors(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_tensors(item) for item in value]
    if isinstance(value, np.ndarray):
        return {"__numpy__": torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, bytes):
        return {"__bytes__": torch.frombuffer(bytearray(value), dtype=torch.uint8)}
    return value


def to_numpy(value):
    """The inverse of `to_tensors`."""
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return value["__bytes__"].numpy().tobytes()
        if set(value) == {"__numpy__"}:
            return value["__numpy__"].numpy()
        return {key: to_numpy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_numpy(item) for item in value]
    return value


def _frames_copy(state_file: Path) -> int:
    return int(STATE_FILE.fullmatch(state_file.name).group(2))


class CheckpointStore:
    """The `keep` newest checkpoints of one run, in `directory`."""

    def __init__(self, directory: Path, keep: int = 2):
        if keep < 1:
            raise ValueError(f"checkpoint.keep={keep} is not allowed: must be at least 1")
        self.directory = Path(directory)
        self.keep = keep

    def state_files(self) -> list[Path]:
        """Complete state files, oldest first."""
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if STATE_FILE.fullmatch(p.name))

    def _frames_path(self, copy: int) -> Path:
        return self.directory / f"frames-{copy}.bin"

    def _sidecar_path(self, copy: int) -> Path:
        return self.directory / f"frames-{copy}.json"

    def _synced_count(self, copy: int) -> int | None:
        try:
            return json.loads(self._sidecar_path(copy).read_text())["frames_written"]
        except (OSError, ValueError, KeyError):
            return None

    def save(self, step: int, state: dict, frames: np.ndarray, frames_written: int) -> Path:
        """Write checkpoint `step`; `frames` is the live ring and `frames_written` its count."""
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = self.state_files()
        used = {_frames_copy(p) for p in existing}
        copy = min(set(range(self.keep)) - used, default=None)
        if copy is None:
            copy = _frames_copy(existing[0])
            existing[0].unlink()
            _fsync_directory(self.directory)
        self._sync_frames(copy, frames, frames_written)
        payload = {
            "format": FORMAT,
            "version": VERSION,
            "step": step,
            "frames_copy": copy,
            "frames_written": frames_written,
            "frames_shape": list(frames.shape),
            "state": to_tensors(state),
        }
        path = self.directory / f"state-{step:012d}-frames{copy}.pt"
        write_atomically(path, lambda file: torch.save(payload, file))
        return path

    def _sync_frames(self, copy: int, frames: np.ndarray, frames_written: int) -> None:
        capacity = len(frames)
        synced = self._synced_count(copy)
        self._sidecar_path(copy).unlink(missing_ok=True)
        _fsync_directory(self.directory)
        if synced is None or not 0 <= frames_written - synced < capacity:
            ranges = [(0, capacity)]
        else:
            start, count = synced % capacity, frames_written - synced
            end = start + count
            ranges = [(start, min(end, capacity))] + (
                [(0, end - capacity)] if end > capacity else []
            )
        slot_bytes = frames[0].nbytes
        descriptor = os.open(self._frames_path(copy), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(descriptor, frames.nbytes)
            for first, last in ranges:
                flat = memoryview(frames[first:last].reshape(-1))
                for offset in range(0, len(flat), _CHUNK_BYTES):
                    chunk = flat[offset : offset + _CHUNK_BYTES]
                    os.pwrite(descriptor, chunk, first * slot_bytes + offset)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        sidecar = json.dumps({"frames_written": frames_written}).encode()
        write_atomically(self._sidecar_path(copy), lambda file: file.write(sidecar))

    def _read(self, path: Path) -> dict:
        try:
            payload = torch.load(path, weights_only=True, map_location="cpu")
        except Exception as error:  # torch raises many types for a damaged file
            raise CheckpointError(
                f"checkpoint {path} is corrupted or truncated ({type(error).__name__}); "
                "delete it to resume from the one before"
            ) from None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise CheckpointError(f"{path} is not a checkpoint of this application")
        if payload.get("version") != VERSION:
            raise CheckpointError(
                f"checkpoint {path} has format version {payload.get('version')}; "
                f"this version of the application reads version {VERSION}"
            )
        return payload

    def read_latest(self) -> dict | None:
        """The newest checkpoint's payload (checked, frames not read yet), or None."""
        files = self.state_files()
        if not files:
            return None
        path = files[-1]
        payload = self._read(path)
        if self._synced_count(payload["frames_copy"]) != payload["frames_written"]:
            raise CheckpointError(
                f"checkpoint {path}: its replay frames were changed after it was written; "
                "delete it to resume from the one before"
            )
        payload["path"] = path
        payload["state"] = to_numpy(payload["state"])
        return payload

    def read_frames(self, payload: dict, frames_out: np.ndarray) -> None:
        """Fill the live ring `frames_out` from the checkpoint's copy of the frames."""
        if list(frames_out.shape) != payload["frames_shape"]:
            raise CheckpointError(
                f"checkpoint {payload['path']} holds frames of shape "
                f"{tuple(payload['frames_shape'])}; the configured replay has {frames_out.shape}"
            )
        with open(self._frames_path(payload["frames_copy"]), "rb") as file:
            view = memoryview(frames_out.reshape(-1))
            for offset in range(0, len(view), _CHUNK_BYTES):
                chunk = view[offset : offset + _CHUNK_BYTES]
                if file.readinto(chunk) != len(chunk):
                    raise CheckpointError(f"replay frames {file.name} are truncated")
