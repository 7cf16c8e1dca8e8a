"""Crash-safe checkpoints of a whole training run, replay memory included.

A checkpoint is a state file (`state-<step>-frames<m>.pt`: networks, optimizer, counters,
generators, sampler, replay metadata — everything but the frames) plus one on-disk copy of the
replay's frames (`frames-<m>.bin`). There are as many frame copies as kept checkpoints; each
checkpoint brings the copy of the oldest one up to date by writing only the slots written since
that copy was last synced (`keep` checkpoint periods' worth, once every copy exists), straight
from the live array (no second in-memory copy): with the paper's settings (1M slots, a
checkpoint every 250k steps, keep 2) about half of the 7 GB per checkpoint, never a RAM copy.
The slots written since are found by ring order: every slot written since `frames_written` was
s lies in ring positions s … frames_written − 1 (`replay.storage.Storage`); a storage that
writes anywhere (forgetting by priority) advances the count past each slot it writes, and its
checkpoints are then in effect full copies.

Invariants that make it crash-safe:
- a state file exists only complete: written to a temporary name, fsynced, renamed;
- a state file names its frame copy and the `frames_written` count the copy held when it was
  made, and the copy's sidecar (`frames-<m>.json`) records the count it holds now; they match
  exactly when the copy belongs to that state file. A copy is only rewritten after the state
  file that used it was deleted, and its sidecar is removed before the first byte changes.
- a copy is only synced incrementally when it is known to hold this run's history (it belongs
  to a state file present when the store was opened, or this process synced it); any other
  copy is rewritten in full, since it may hold a timeline that was abandoned;
- after a sync the copy equals the live frames, so the sidecar also records a CRC-32 of every
  chunk of `chunk_slots` slots, recomputed from memory for the chunks the sync wrote (beside
  the writes, in a thread: zlib releases the GIL) and checked as the copy is read back, so
  bytes changed on disk are refused rather than trained on.
So whatever moment a process is killed at, or a write fails at, every state file still present
either loads with its exact frames or is detected as unusable. `keep` is at least 2
(`CheckpointSettings`), so one complete checkpoint always survives a failed save: with one the
old one would be gone before the new one is complete.
"""

import json
import os
import re
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from artifacts.atomic import CHUNK_BYTES, fsync_directory, torch_bytes, write_all, write_atomically
from artifacts.header import Header
from training.settings import CheckpointSettings

CHECKSUM_CHUNK_BYTES = CHUNK_BYTES  # the frames covered by one CRC-32 (whole slots)
CHECKPOINT = Header("per-atari-checkpoint", 1, "checkpoint")
STATE_FILE = re.compile(r"state-(\d{12})-frames(\d+)\.pt")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message names the file."""


_PLAIN = (bool, int, float, str, type(None))


def to_tensors(value):
    """Nested numpy arrays and bytes become tagged tensors and numpy scalars Python numbers, so
    `torch.load(weights_only=True)` reads them back; tensors and plain values stay. Anything
    else is a TypeError here, rather than a checkpoint that cannot be loaded."""
    if isinstance(value, dict):
        return {key: to_tensors(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_tensors(item) for item in value]
    if isinstance(value, np.ndarray):
        return {"__numpy__": torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, bytes):
        return {"__bytes__": torch.frombuffer(bytearray(value), dtype=torch.uint8)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor) or type(value) in _PLAIN:
        return value
    raise TypeError(f"a checkpoint cannot hold a {type(value).__name__}: {value!r:.80}")


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

    def __init__(self, directory: Path, keep: int = CheckpointSettings.keep):
        CheckpointSettings.check("keep", keep)
        self.directory = Path(directory)
        self.keep = keep
        # Frame copies known to hold this run's own history: those of the state files found
        # first, and those this process synced. Any other copy (an orphan of a killed save, or
        # of a checkpoint deleted by hand) may hold another timeline and is rewritten in full.
        self._trusted: set[int] | None = None

    def _trusted_copies(self) -> set[int]:
        if self._trusted is None:
            self._trusted = {_frames_copy(p) for p in self.state_files()}
        return self._trusted

    def state_files(self) -> list[Path]:
        """Complete state files, oldest first."""
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if STATE_FILE.fullmatch(p.name))

    def latest_step(self) -> int | None:
        """The step of the newest complete checkpoint, or None."""
        files = self.state_files()
        return int(STATE_FILE.fullmatch(files[-1].name).group(1)) if files else None

    def _frames_path(self, copy: int) -> Path:
        return self.directory / f"frames-{copy}.bin"

    def _sidecar_path(self, copy: int) -> Path:
        return self.directory / f"frames-{copy}.json"

    def _sidecar(self, copy: int) -> dict:
        """The copy's record: `frames_written` (absent: the copy is not known to be complete),
        `chunk_slots` and `crc32`, one per chunk (absent in copies written before checksums)."""
        try:
            sidecar = json.loads(self._sidecar_path(copy).read_text())
        except (OSError, ValueError):
            return {}
        return sidecar if isinstance(sidecar, dict) else {}

    def _synced_count(self, copy: int) -> int | None:
        return self._sidecar(copy).get("frames_written")

    def save(self, step: int, state: dict, frames: np.ndarray, frames_written: int) -> Path:
        """Write checkpoint `step`; `frames` is the live ring and `frames_written` its count.

        Raises a one-line `CheckpointError` if the disk refuses a write (full, read-only, ...);
        the checkpoints written before stay complete and loadable.
        """
        path = self.directory / f"state-{step:012d}-frames?.pt"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            trusted = self._trusted_copies()
            existing = self.state_files()
            used = {_frames_copy(p) for p in existing}
            free = set(range(self.keep)) - used
            copy = min(free) if free else _frames_copy(existing[0])
            path = self.directory / f"state-{step:012d}-frames{copy}.pt"
            # ~100 MB at full size (all but the frames), serialized before any file changes.
            serialized = torch_bytes(self._payload(step, state, copy, frames, frames_written))
            if copy in used:
                existing[0].unlink()
                fsync_directory(self.directory)
            self._sync_frames(copy, frames, frames_written, incremental=copy in trusted)
            trusted.add(copy)
            write_atomically(path, serialized)
        except OSError as error:
            files = self.state_files()
            kept = "no earlier one exists"
            if files:
                kept = f"{files[-1].name} is the newest complete one"
            raise CheckpointError(f"could not write checkpoint {path}: {error}; {kept}") from None
        return path

    @staticmethod
    def _payload(step, state, copy, frames: np.ndarray, frames_written: int) -> dict:
        return {
            **CHECKPOINT.fields(),
            "step": step,
            "frames_copy": copy,
            "frames_written": frames_written,
            "frames_shape": list(frames.shape),
            "state": to_tensors(state),
        }

    def _sync_frames(
        self, copy: int, frames: np.ndarray, frames_written: int, incremental: bool
    ) -> None:
        capacity = len(frames)
        sidecar = self._sidecar(copy) if incremental else {}
        synced = sidecar.get("frames_written")
        self._sidecar_path(copy).unlink(missing_ok=True)
        fsync_directory(self.directory)
        full = synced is None or not 0 <= frames_written - synced < capacity
        if full:
            # Slots the ring has not reached yet are zero; the emptied file reads as zeros there.
            ranges = [(0, min(frames_written, capacity))]
        else:
            start, count = synced % capacity, frames_written - synced
            end = start + count
            ranges = [(start, min(end, capacity))] + (
                [(0, end - capacity)] if end > capacity else []
            )
        slot_bytes = frames[0].nbytes
        chunk_slots = max(1, CHECKSUM_CHUNK_BYTES // slot_bytes)
        checksums = sidecar.get("crc32") if sidecar.get("chunk_slots") == chunk_slots else None
        if full or checksums is None:  # every chunk (slots never written are zeros in both)
            checksums, stale = [0] * -(-capacity // chunk_slots), [(0, capacity)]
        else:
            stale = ranges
        chunks = sorted(
            {c for a, b in stale for c in range(a // chunk_slots, -(-b // chunk_slots))}
        )
        descriptor = os.open(self._frames_path(copy), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            with ThreadPoolExecutor(1) as hashing:
                hashed = hashing.submit(_chunk_checksums, frames, chunks, chunk_slots)
                if full:
                    os.ftruncate(descriptor, 0)
                os.ftruncate(descriptor, frames.nbytes)
                for first, last in ranges:
                    write_all(descriptor, frames[first:last].reshape(-1), first * slot_bytes)
                os.fsync(descriptor)
                for chunk, checksum in zip(chunks, hashed.result(), strict=True):
                    checksums[chunk] = checksum
        finally:
            os.close(descriptor)
        record = {"frames_written": frames_written, "chunk_slots": chunk_slots, "crc32": checksums}
        write_atomically(self._sidecar_path(copy), json.dumps(record).encode())

    def _read(self, path: Path) -> dict:
        try:
            with zipfile.ZipFile(path) as archive:  # torch.load does not check the CRCs
                damaged = archive.testzip()
            if damaged is not None:
                raise zipfile.BadZipFile(f"bad CRC-32 for {damaged}")
            payload = torch.load(path, weights_only=True, map_location="cpu")
        except Exception as error:  # torch raises many types for a damaged file
            raise CheckpointError(
                f"checkpoint {path} is corrupted or truncated ({type(error).__name__}); "
                "delete it to resume from the one before"
            ) from None
        CHECKPOINT.check(path, payload, CheckpointError)
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
        frames = self._frames_path(payload["frames_copy"])
        size = frames.stat().st_size if frames.is_file() else 0
        if size != np.prod(payload["frames_shape"]):
            raise CheckpointError(
                f"checkpoint {path}: its replay frames {frames.name} are missing or truncated "
                f"({size} bytes); delete it to resume from the one before"
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
        path = self._frames_path(payload["frames_copy"])
        sidecar = self._sidecar(payload["frames_copy"])
        chunk_bytes = sidecar.get("chunk_slots", 0) * frames_out[0].nbytes or CHECKSUM_CHUNK_BYTES
        expected = sidecar.get("crc32")  # None: a copy from before checksums, read unchecked
        try:
            with open(path, "rb") as file:
                view = memoryview(frames_out.reshape(-1))
                for index, offset in enumerate(range(0, len(view), chunk_bytes)):
                    chunk = view[offset : offset + chunk_bytes]
                    if file.readinto(chunk) != len(chunk):
                        raise CheckpointError(f"replay frames {path} are truncated")
                    if expected is not None and zlib.crc32(chunk) != expected[index]:
                        raise CheckpointError(
                            f"checkpoint {payload['path']}: its replay frames {path.name} were "
                            f"changed on disk (bytes {offset}-{offset + len(chunk) - 1} fail "
                            "their checksum); delete it to resume from the one before"
                        )
        except OSError as error:
            raise CheckpointError(f"replay frames {path} cannot be read: {error}") from None


def _chunks_of(ranges: list[tuple[int, int]], chunk_slots: int) -> list[int]:
    """The chunks of `chunk_slots` slots that the slot ranges [first, last) touch."""
    return sorted({c for a, b in ranges for c in range(a // chunk_slots, -(-b // chunk_slots))})


def _chunk_checksums(frames: np.ndarray, chunks: list[int], chunk_slots: int) -> list[int]:
    """CRC-32 of each chunk of `chunk_slots` slots of `frames` (the last one may be shorter)."""
    return [
        zlib.crc32(memoryview(frames[c * chunk_slots : (c + 1) * chunk_slots].reshape(-1)))
        for c in chunks
    ]
