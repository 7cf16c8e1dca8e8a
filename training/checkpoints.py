"""Crash-safe checkpoints of a whole training run, replay memory included.

A checkpoint is a state file (`state-<step>-frames<m>.pt`: networks, optimizer, counters,
generators, sampler, replay metadata — everything but the frames) plus one on-disk copy of the
replay's frames (`frames-<m>.bin`). There are as many frame copies as kept checkpoints; each
checkpoint brings the copy of the oldest one up to date by writing only the slots written since
that copy was last synced (`keep` checkpoint periods' worth, once every copy exists), straight
from the live array (no second in-memory copy). The slots written since are found by ring order:
every slot written since `frames_written` was s lies in ring positions s … frames_written − 1
(`replay.storage.Storage`); a storage that writes anywhere (forgetting by priority) advances the
count past each slot it writes, and its checkpoints are then in effect full copies.

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
  chunk of `chunk_slots` slots, checked as the copy is read back (each chunk hashed as the
  next is read), so bytes changed on disk are refused rather than trained on. They are
  computed from memory beside the writes (in a thread: zlib releases the GIL), for the chunks
  written since the last sync of any copy (or since the frames were read back): a chunk is
  hashed once after it changes, not once per copy, and one the ring has not reached (zeros
  in memory and in the copy alike) gets the CRC of zeros without being read.
So whatever moment a process is killed at, or a write fails at, every state file still present
either loads with its exact frames or is detected as unusable. `keep` is at least 2
(`CheckpointSettings`), so one complete checkpoint always survives a failed save: with one the
old one would be gone before the new one is complete.
"""

import functools
import json
import os
import re
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from artifacts.atomic import CHUNK_BYTES, fsync_directory, write_all, write_atomically
from artifacts.header import Header
from artifacts.tensor_tree import to_numpy, to_tensors, torch_bytes
from training.settings import CheckpointSettings

CHECKSUM_CHUNK_BYTES = CHUNK_BYTES  # the frames one CRC-32 covers, in whole slots (`_chunk_slots`)
CHECKPOINT = Header("per-atari-checkpoint", 1, "checkpoint")
STATE_FILE = re.compile(r"state-(\d{12})-frames(\d+)\.pt")
FRAMES_FILE = re.compile(r"frames-(\d+)\.bin")


# The ring arithmetic of frame copies, on the ring order the module docstring states.
def is_count(value) -> bool:
    return type(value) is int and value >= 0


def written_since(count, frames_written: int, capacity: int) -> list[tuple[int, int]] | None:
    """The ring's slot ranges [first, last) written since its count of frames written was
    `count`; None where the count cannot tell (none, or a whole ring or more ago)."""
    if not is_count(count) or not 0 <= frames_written - count < capacity:
        return None
    start = count % capacity
    end = start + frames_written - count
    return [(start, min(end, capacity))] + ([(0, end - capacity)] if end > capacity else [])


def chunks_of(ranges: list[tuple[int, int]], chunk_slots: int) -> list[int]:
    """The chunks of `chunk_slots` slots that the slot ranges [first, last) touch."""
    return sorted({c for a, b in ranges for c in range(a // chunk_slots, -(-b // chunk_slots))})


def recorded_checksums(sidecar: dict, capacity: int) -> tuple[int, list[int]] | None:
    """A frame copy's record's chunk size in slots and its CRC-32s, one per chunk of a ring of
    `capacity` slots; None where they are absent or malformed (damaged or edited on disk)."""
    chunk_slots, checksums = sidecar.get("chunk_slots"), sidecar.get("crc32")
    if not (is_count(chunk_slots) and chunk_slots > 0 and isinstance(checksums, list)):
        return None
    if len(checksums) != -(-capacity // chunk_slots) or not all(map(is_count, checksums)):
        return None
    return chunk_slots, checksums


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message names the file."""


def _frames_copy(state_file: Path) -> int:
    return int(STATE_FILE.fullmatch(state_file.name).group(2))


class CheckpointStore:
    """The `keep` newest checkpoints of one run, in `directory`."""

    def __init__(self, directory: Path, keep: int = CheckpointSettings.keep):
        self.directory = Path(directory)
        self.keep = keep
        # Frame copies known to hold this run's own history (an orphan of a killed save, or of
        # a checkpoint deleted by hand, may hold another): the module's invariants.
        self._trusted: set[int] | None = None
        # The CRC-32s of the live frames' chunks at a count of frames written (frames_written,
        # chunk_slots, crc32s): the last sync's, or those the frames read back matched.
        self._hashed: tuple[int, int, list[int]] | None = None

    def state_files(self) -> list[Path]:
        """Complete state files, oldest first."""
        return sorted(p for p in self.directory.glob("*") if STATE_FILE.fullmatch(p.name))

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
        `chunk_slots` and `crc32`, one per chunk (absent in copies written before checksums;
        read through `recorded_checksums`, which refuses malformed ones)."""
        try:
            sidecar = json.loads(self._sidecar_path(copy).read_text())
        except (OSError, ValueError):
            return {}
        return sidecar if isinstance(sidecar, dict) else {}

    def save(self, step: int, state: dict, frames: np.ndarray, frames_written: int) -> Path:
        """Write checkpoint `step`; `frames` is the live ring and `frames_written` its count. A
        write the disk refuses (full, read-only, ...) is a one-line `CheckpointError`; the
        checkpoints written before stay complete and loadable."""
        path = self.directory / f"state-{step:012d}-frames?.pt"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            existing = self.state_files()
            used = {_frames_copy(p) for p in existing}
            if self._trusted is None:  # the copies of the state files found first
                self._trusted = set(used)
            free = set(range(self.keep)) - used
            copy = min(free) if free else _frames_copy(existing[0])
            path = self.directory / f"state-{step:012d}-frames{copy}.pt"
            payload = {
                **CHECKPOINT.fields(),
                "step": step,
                "frames_copy": copy,
                "frames_written": frames_written,
                "frames_shape": list(frames.shape),
                "state": to_tensors(state),
            }
            # ~100 MB at full size (all but the frames), serialized before any file changes.
            serialized = torch_bytes(payload)
            if copy in used:
                existing[0].unlink()
                fsync_directory(self.directory)
            self._sync_frames(copy, frames, frames_written, incremental=copy in self._trusted)
            self._trusted.add(copy)
            write_atomically(path, serialized)
        except OSError as error:
            files = self.state_files()
            kept = (
                f"{files[-1].name} is the newest complete one" if files else "no earlier one exists"
            )
            raise CheckpointError(f"could not write checkpoint {path}: {error}; {kept}") from None
        return path

    def keep_latest_only(self) -> bool:
        """Delete every checkpoint but the newest, and every frame copy it does not use: what a
        finished run keeps. A later save into this directory goes to a free copy, written in
        full, so the newest still survives a failed one. Each state file goes before its copy,
        and a copy's sidecar before its bytes (the module's invariants). Returns whether there
        was anything to delete."""
        files = self.state_files()
        if not files:
            return False
        kept = _frames_copy(files[-1])
        for path in files[:-1]:
            path.unlink()
        fsync_directory(self.directory)
        names = (FRAMES_FILE.fullmatch(p.name) for p in self.directory.iterdir())
        copies = {int(name.group(1)) for name in names if name}
        for copy in sorted(copies - {kept}):
            self._sidecar_path(copy).unlink(missing_ok=True)
            self._frames_path(copy).unlink()
            if self._trusted is not None:
                self._trusted.discard(copy)
        fsync_directory(self.directory)
        return len(files) > 1 or copies != {kept}

    def _sync_frames(
        self, copy: int, frames: np.ndarray, frames_written: int, incremental: bool
    ) -> None:
        capacity = len(frames)
        synced = self._sidecar(copy).get("frames_written") if incremental else None
        self._sidecar_path(copy).unlink(missing_ok=True)
        fsync_directory(self.directory)
        reached = min(frames_written, capacity)  # the slots past these are zero
        ranges = written_since(synced, frames_written, capacity)
        full = ranges is None
        if full:
            ranges = [(0, reached)]  # the emptied file reads as zeros past them
        chunk_slots = _chunk_slots(frames)
        known, stale = self._hashed, None
        if known is not None and known[1] == chunk_slots:
            checksums, stale = list(known[2]), written_since(known[0], frames_written, capacity)
        if stale is None:  # every chunk, those the ring has not reached without reading them
            chunks = range(-(-capacity // chunk_slots))
            checksums = [_zero_checksum(_chunk(frames, c, chunk_slots).nbytes) for c in chunks]
            stale = [(0, reached)]
        chunks = chunks_of(stale, chunk_slots)
        descriptor = os.open(self._frames_path(copy), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            with ThreadPoolExecutor(1) as hashing:
                hashed = hashing.map(zlib.crc32, [_chunk(frames, c, chunk_slots) for c in chunks])
                if full:
                    os.ftruncate(descriptor, 0)
                os.ftruncate(descriptor, frames.nbytes)
                for first, last in ranges:
                    write_all(descriptor, frames[first:last].reshape(-1), first * frames[0].nbytes)
                os.fsync(descriptor)
                for chunk, checksum in zip(chunks, hashed, strict=True):
                    checksums[chunk] = checksum
        finally:
            os.close(descriptor)
        record = {"frames_written": frames_written, "chunk_slots": chunk_slots, "crc32": checksums}
        write_atomically(self._sidecar_path(copy), json.dumps(record).encode())
        self._hashed = (frames_written, chunk_slots, checksums)

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
        if self._sidecar(payload["frames_copy"]).get("frames_written") != payload["frames_written"]:
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
        copy = payload["frames_copy"]
        path, sidecar = self._frames_path(copy), self._sidecar(copy)
        chunk_slots, expected = _chunk_slots(frames_out), None
        if "crc32" in sidecar:  # absent: a copy from before checksums, read unchecked
            recorded = recorded_checksums(sidecar, len(frames_out))
            if recorded is None:
                raise CheckpointError(
                    f"checkpoint {payload['path']}: the checksums of its replay frames in "
                    f"{self._sidecar_path(copy).name} are damaged; delete it to resume from the "
                    "one before"
                )
            chunk_slots, expected = recorded
        chunk_bytes = chunk_slots * frames_out[0].nbytes
        view = memoryview(frames_out.reshape(-1))
        try:
            with open(path, "rb") as file, ThreadPoolExecutor(1) as hashing:
                hashed = []
                for offset in range(0, len(view), chunk_bytes):
                    chunk = view[offset : offset + chunk_bytes]
                    if file.readinto(chunk) != len(chunk):
                        raise CheckpointError(f"replay frames {path} are truncated")
                    if expected is not None:
                        hashed.append(hashing.submit(zlib.crc32, chunk))
                for index, checksum in enumerate(hashed):
                    if checksum.result() != expected[index]:
                        first = index * chunk_bytes
                        last = min(first + chunk_bytes, len(view)) - 1
                        raise CheckpointError(
                            f"checkpoint {payload['path']}: its replay frames {path.name} were "
                            f"changed on disk (bytes {first}-{last} fail their checksum); delete "
                            "it to resume from the one before"
                        )
        except OSError as error:
            raise CheckpointError(f"replay frames {path} cannot be read: {error}") from None
        if expected is not None:
            self._hashed = (payload["frames_written"], chunk_slots, expected)


def _chunk_slots(frames: np.ndarray) -> int:
    """The whole slots in the frames one CRC-32 covers."""
    return max(1, CHECKSUM_CHUNK_BYTES // frames[0].nbytes)


def _chunk(frames: np.ndarray, index: int, chunk_slots: int) -> np.ndarray:
    """Chunk `index` of `frames`, `chunk_slots` slots (the last one may be shorter), flat."""
    return frames[index * chunk_slots : (index + 1) * chunk_slots].reshape(-1)


@functools.cache
def _zero_checksum(size: int) -> int:
    """The CRC-32 of `size` zero bytes: a chunk's that the ring has not reached."""
    return zlib.crc32(bytes(size))
