"""CheckpointStore: exact round trips, keep-K rotation, a finished run's one checkpoint,
incremental frame copies, failed writes and unreadable files."""

import errno
import json
import os
import re
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from training import checkpoints
from training.checkpoints import CHECKPOINT, CheckpointError, CheckpointStore

SHAPE = (10, 6, 6)  # a ring of 10 slots of 6x6 frames
SLOT_BYTES = 36


class Ring:
    """A stand-in for FrameStorage's frames: each write fills the next slot with a new value."""

    def __init__(self):
        self.frames = np.zeros(SHAPE, dtype=np.uint8)
        self.written = 0

    def write(self, count: int, first_value: int = 1) -> None:
        for value in range(first_value, first_value + count):
            self.frames[self.written % SHAPE[0]] = value
            self.written += 1


def state(step: int) -> dict:
    return {
        "step": step,
        "returns": [1.5, -2.0],
        "array": np.arange(6, dtype=np.float32).reshape(2, 3) * step,
        "mask": np.array([True, False]),
        "ale": bytes(range(7)),
        "network": {"weight": torch.full((2, 2), float(step))},
        "rng": np.random.default_rng(step).bit_generator.state,  # 128-bit Python ints
        "nothing": None,
    }


def assert_same(actual, expected) -> None:
    assert type(actual) is type(expected)
    if isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for key in expected:
            assert_same(actual[key], expected[key])
    elif isinstance(expected, list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
    elif isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)
    elif isinstance(expected, torch.Tensor):
        assert torch.equal(actual, expected)
    else:
        assert actual == expected


def loaded(directory: Path) -> tuple[dict, np.ndarray]:
    """What a new process resuming from `directory` gets: the newest payload and its frames."""
    store = CheckpointStore(directory)
    payload = store.read_latest()
    frames = np.zeros(SHAPE, dtype=np.uint8)
    store.read_frames(payload, frames)
    return payload, frames


def frame_copy(directory: Path, copy: int) -> np.ndarray:
    return np.fromfile(directory / f"frames-{copy}.bin", dtype=np.uint8).reshape(SHAPE)


def test_round_trip_is_exact(tmp_path):
    ring = Ring()
    ring.write(13)
    CheckpointStore(tmp_path).save(7, state(7), ring.frames, ring.written)
    payload, frames = loaded(tmp_path)
    assert (payload["step"], payload["frames_written"]) == (7, 13)
    assert_same(payload["state"], state(7))
    np.testing.assert_array_equal(frames, ring.frames)


@pytest.mark.parametrize("keep", [2, 3])
def test_keeps_the_newest_k_each_with_its_own_frame_copy(tmp_path, keep):
    store, ring = CheckpointStore(tmp_path, keep), Ring()
    for step in range(1, 6):
        ring.write(3, first_value=10 * step)
        store.save(step, state(step), ring.frames, ring.written)
    steps = [int(p.name[6:18]) for p in store.state_files()]
    assert steps == list(range(6 - keep, 6))
    copies = sorted(p.name[-4] for p in store.state_files())
    assert copies == [str(c) for c in range(keep)]
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {p.name for p in store.state_files()} | {
        f"frames-{c}.{ext}" for c in range(keep) for ext in ("bin", "json")
    }
    payload, frames = loaded(tmp_path)
    assert payload["step"] == 5
    np.testing.assert_array_equal(frames, ring.frames)


@pytest.mark.parametrize("reopened", [False, True])
def test_a_finished_run_keeps_its_newest_checkpoint_alone_and_can_go_on(tmp_path, reopened):
    """Checkpoints 1-5 with keep 2 leave 4 (copy 1) and 5 (copy 0); keeping the latest only
    leaves 5 and its copy, and a file that is no checkpoint's alone. A later save, by the same
    store or a new process's, goes to the free copy in full, and both checkpoints then load
    exactly."""
    store, ring = CheckpointStore(tmp_path, keep=2), Ring()
    for step in range(1, 6):
        ring.write(3, first_value=10 * step)
        store.save(step, state(step), ring.frames, ring.written)
    (tmp_path / "frames-of-a-user.bin").write_bytes(b"kept")
    store.keep_latest_only()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "frames-0.bin",
        "frames-0.json",
        "frames-of-a-user.bin",
        "state-000000000005-frames0.pt",
    ]
    payload, frames = loaded(tmp_path)
    assert payload["step"] == 5
    np.testing.assert_array_equal(frames, ring.frames)
    before = ring.frames.copy()
    ring.write(4, first_value=100)
    store = CheckpointStore(tmp_path, keep=2) if reopened else store
    assert store.save(6, state(6), ring.frames, ring.written).name.endswith("frames1.pt")
    np.testing.assert_array_equal(frame_copy(tmp_path, 1), ring.frames)
    np.testing.assert_array_equal(frame_copy(tmp_path, 0), before)
    assert loaded(tmp_path)[0]["step"] == 6


def test_incremental_sync_writes_only_the_slots_written_since(tmp_path, monkeypatch):
    """Copy 0 is synced at 12 then 19 frames (slots 2..8); copy 1 at 15 then 24 (slots 5..9 and
    0..3, across the wrap-around)."""
    store, ring, real_pwrite = CheckpointStore(tmp_path, keep=2), Ring(), os.pwrite
    written_slots: list[int] = []

    def recording_pwrite(descriptor, data, offset):
        first, count = offset // SLOT_BYTES, len(data) // SLOT_BYTES
        written_slots.extend(range(first, first + count))
        return real_pwrite(descriptor, data, offset)

    monkeypatch.setattr(os, "pwrite", recording_pwrite)
    expected = [
        (12, 0, list(range(10))),  # a new copy: written in full
        (15, 1, list(range(10))),
        (19, 0, list(range(2, 9))),
        (24, 1, list(range(5, 10)) + list(range(0, 4))),
        (26, 0, [9, 0, 1, 2, 3, 4, 5]),
    ]
    for step, (total, copy, slots) in enumerate(expected, start=1):
        ring.write(total - ring.written, first_value=100 + 7 * step)
        written_slots.clear()
        path = store.save(step, state(step), ring.frames, ring.written)
        assert path.name == f"state-{step:012d}-frames{copy}.pt"
        assert written_slots == slots
        np.testing.assert_array_equal(frame_copy(tmp_path, copy), ring.frames)
    np.testing.assert_array_equal(loaded(tmp_path)[1], ring.frames)


def test_a_copy_left_by_an_abandoned_timeline_is_rewritten_in_full(tmp_path):
    """Checkpoint 2 is deleted (as its error messages advise when it is damaged): resuming
    from 1 and writing other frames, checkpoint 3 must not trust the frames of copy 1."""
    store, ring = CheckpointStore(tmp_path, keep=2), Ring()
    ring.write(12, first_value=1)
    store.save(1, state(1), ring.frames, ring.written)
    ring.write(3, first_value=200)
    store.save(2, state(2), ring.frames, ring.written).unlink()
    store = CheckpointStore(tmp_path, keep=2)  # a new process resumes from checkpoint 1
    ring.frames[:], ring.written = loaded(tmp_path)[1], 12
    ring.write(5, first_value=100)  # 17 frames: its sidecar's 15 would look 2 behind
    assert store.save(3, state(3), ring.frames, ring.written).name.endswith("frames1.pt")
    np.testing.assert_array_equal(frame_copy(tmp_path, 1), ring.frames)


def failing_after_half(real):
    """A write that stores half of its bytes and then finds the disk full."""

    def write(descriptor, data, *offset):
        real(descriptor, memoryview(data)[: len(data) // 2], *offset)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


@pytest.mark.parametrize("failing", ["frames", "state file"])
def test_a_save_failing_midway_leaves_the_previous_checkpoint_exact(tmp_path, monkeypatch, failing):
    store, ring = CheckpointStore(tmp_path, keep=2), Ring()
    ring.write(12, first_value=1)
    store.save(1, state(1), ring.frames, ring.written)
    ring.write(4, first_value=50)
    store.save(2, state(2), ring.frames, ring.written)
    frames_at_2 = ring.frames.copy()
    ring.write(3, first_value=90)
    if failing == "frames":
        monkeypatch.setattr(os, "pwrite", failing_after_half(os.pwrite))
    else:
        real_write = os.write

        def write(descriptor, data):
            name = Path(os.readlink(f"/proc/self/fd/{descriptor}")).name
            if name.startswith(".state-"):
                return failing_after_half(real_write)(descriptor, data)
            return real_write(descriptor, data)

        monkeypatch.setattr(os, "write", write)
    with pytest.raises(CheckpointError) as error:
        store.save(3, state(3), ring.frames, ring.written)
    message = str(error.value)
    assert message == (
        f"could not write checkpoint {tmp_path}/state-000000000003-frames0.pt: "
        f"[Errno 28] No space left on device; state-000000000002-frames1.pt is the newest "
        "complete one"
    )
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.glob(".*")) == []  # no temporary file left
    payload, frames = loaded(tmp_path)
    assert payload["step"] == 2
    assert_same(payload["state"], state(2))
    np.testing.assert_array_equal(frames, frames_at_2)
    # The next save brings copy 0 up to date again, whatever it holds.
    store.save(3, state(3), ring.frames, ring.written)
    np.testing.assert_array_equal(loaded(tmp_path)[1], ring.frames)


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "bit flip":  # in the stored tensor bytes, which torch.load alone accepts
        flipped = bytearray(data)
        flipped[data.index(np.arange(6, dtype=np.float32).tobytes()) + 5] ^= 0x10
        path.write_bytes(bytes(flipped))
    elif how == "garbage":
        path.write_bytes(b"\x00" * len(data))
    else:
        payload = torch.load(path, weights_only=True)
        payload.update(how)
        torch.save(payload, path)


@pytest.mark.parametrize(
    "how,problem",
    [
        ("truncated", "is corrupted or truncated (BadZipFile); delete it to resume from the one"),
        ("bit flip", "is corrupted or truncated (BadZipFile); delete it to resume from the one"),
        ("garbage", "is corrupted or truncated (BadZipFile); delete it to resume from the one"),
        (
            {"version": CHECKPOINT.version + 1},
            f"has format version {CHECKPOINT.version + 1}; this version of the",
        ),
        ({"format": "something-else"}, "is not a checkpoint of this application"),
    ],
    ids=["truncated", "bit flip", "garbage", "newer version", "other format"],
)
def test_an_unusable_state_file_is_a_one_line_error_naming_it(tmp_path, how, problem):
    ring = Ring()
    ring.write(12, first_value=1)
    path = CheckpointStore(tmp_path).save(1, state(1), ring.frames, ring.written)
    damage(path, how)
    with pytest.raises(CheckpointError) as error:
        CheckpointStore(tmp_path).read_latest()
    assert str(path) in str(error.value) and problem in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("how", ["missing", "truncated", "synced later"])
def test_an_unusable_frame_copy_is_a_one_line_error_naming_it(tmp_path, how):
    ring = Ring()
    ring.write(12, first_value=1)
    path = CheckpointStore(tmp_path).save(1, state(1), ring.frames, ring.written)
    frames = tmp_path / "frames-0.bin"
    if how == "missing":
        frames.unlink()
    elif how == "truncated":
        os.truncate(frames, 100)
    else:
        (tmp_path / "frames-0.json").write_text('{"frames_written": 13}')
    expected = (
        f"checkpoint {path}: its replay frames were changed after it was written"
        if how == "synced later"
        else f"checkpoint {path}: its replay frames frames-0.bin are missing or truncated"
    )
    with pytest.raises(CheckpointError, match="^" + re.escape(expected)):
        CheckpointStore(tmp_path).read_latest()


def _leave_a_mark(path: str) -> None:  # what a malicious pickle would run
    Path(path).touch()


class Malicious:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return _leave_a_mark, (str(self.marker),)


def test_checkpoints_load_without_executing_pickled_code(tmp_path):
    ring = Ring()
    ring.write(12, first_value=1)
    path = CheckpointStore(tmp_path).save(1, state(1), ring.frames, ring.written)
    assert torch.load(path, weights_only=True)["format"] == CHECKPOINT.format
    marker = tmp_path / "code-ran"
    payload = torch.load(path, weights_only=True)
    payload["state"]["extra"] = Malicious(marker)
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match="is corrupted or truncated \\(UnpicklingError\\)"):
        CheckpointStore(tmp_path).read_latest()
    assert not marker.exists()


def test_numpy_scalars_come_back_as_python_numbers_and_other_objects_are_refused(tmp_path):
    ring = Ring()
    ring.write(12, first_value=1)
    store = CheckpointStore(tmp_path)
    numbers = {"count": np.int64(3), "mean": np.float32(0.5), "flag": np.bool_(True)}
    store.save(1, numbers, ring.frames, ring.written)
    assert_same(store.read_latest()["state"], {"count": 3, "mean": 0.5, "flag": True})
    files = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    with pytest.raises(TypeError, match="^a checkpoint cannot hold a PosixPath: PosixPath"):
        store.save(2, {"where": tmp_path}, ring.frames, ring.written)
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == files


@pytest.fixture
def small_chunks(monkeypatch):
    """A checksum per 2 slots, so that a save touches some chunks and not others."""
    monkeypatch.setattr(checkpoints, "CHECKSUM_CHUNK_BYTES", 2 * SLOT_BYTES)


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_incremental_saves_keep_every_chunks_checksum_right(tmp_path, small_chunks):
    """Saves that wrap the ring and rewrite only some chunks still read back exactly."""
    ring, store = Ring(), CheckpointStore(tmp_path)
    for step, count in enumerate((4, 3, 5, 9, 2, 13), start=1):
        ring.write(count, first_value=10 * step)
        store.save(step, state(step), ring.frames, ring.written)
        _, frames = loaded(tmp_path)
        np.testing.assert_array_equal(frames, ring.frames)


@pytest.mark.parametrize("slot", [0, 5, 9])
def test_replay_bytes_changed_on_disk_are_refused_in_one_line(tmp_path, small_chunks, slot):
    ring, store = Ring(), CheckpointStore(tmp_path)
    ring.write(7)
    store.save(1, state(1), ring.frames, ring.written)
    ring.write(6, first_value=50)
    path = store.save(2, state(2), ring.frames, ring.written)
    copy = tmp_path / f"frames-{CheckpointStore(tmp_path).read_latest()['frames_copy']}.bin"
    flip(copy, slot * SLOT_BYTES + 3)  # the same size, another byte
    payload = CheckpointStore(tmp_path).read_latest()
    with pytest.raises(CheckpointError) as error:
        CheckpointStore(tmp_path).read_frames(payload, np.zeros(SHAPE, dtype=np.uint8))
    first = slot // 2 * 2 * SLOT_BYTES
    assert str(error.value) == (
        f"checkpoint {path}: its replay frames {copy.name} were changed on disk (bytes "
        f"{first}-{first + 2 * SLOT_BYTES - 1} fail their checksum); delete it to resume from "
        "the one before"
    )


def test_a_copy_from_before_checksums_reads_unchecked_and_gets_them_at_its_next_save(
    tmp_path, small_chunks
):
    ring, store = Ring(), CheckpointStore(tmp_path)
    ring.write(5)
    store.save(1, state(1), ring.frames, ring.written)
    sidecar = tmp_path / "frames-0.json"
    sidecar.write_text(json.dumps({"frames_written": ring.written}))  # the older record
    np.testing.assert_array_equal(loaded(tmp_path)[1], ring.frames)
    resumed = CheckpointStore(tmp_path)
    resumed.read_latest()
    ring.write(3, first_value=70)
    resumed.save(2, state(2), ring.frames, ring.written)
    ring.write(4, first_value=90)
    resumed.save(3, state(3), ring.frames, ring.written)  # copy 0 again, incrementally
    assert "crc32" in json.loads(sidecar.read_text())
    flip(tmp_path / "frames-0.bin", 1)
    with pytest.raises(CheckpointError, match="fail their checksum"):
        loaded(tmp_path)


def test_chunks_the_ring_has_not_reached_are_not_read_and_still_checked(tmp_path, small_chunks):
    """Slots 4..9 of a ring that has written 3 are not read to checksum them (here they hold
    bytes the copy does not: were they read, the copy would fail its check); a byte changed in
    them on disk is still refused."""
    ring, store = Ring(), CheckpointStore(tmp_path)
    ring.write(3)
    ring.frames[4:] = 255
    path = store.save(1, state(1), ring.frames, ring.written)
    _, frames = loaded(tmp_path)
    np.testing.assert_array_equal(frames[:4], ring.frames[:4])
    assert not frames[4:].any()
    flip(tmp_path / "frames-0.bin", 9 * SLOT_BYTES)
    payload = CheckpointStore(tmp_path).read_latest()
    with pytest.raises(CheckpointError) as error:
        CheckpointStore(tmp_path).read_frames(payload, np.zeros(SHAPE, dtype=np.uint8))
    assert str(error.value) == (
        f"checkpoint {path}: its replay frames frames-0.bin were changed on disk (bytes "
        f"{8 * SLOT_BYTES}-{10 * SLOT_BYTES - 1} fail their checksum); delete it to resume from "
        "the one before"
    )


@pytest.mark.parametrize(
    "record",
    [
        {"crc32": [0, 0]},  # fewer checksums than chunks
        {"crc32": "0"},
        {"crc32": None},
        {"crc32": ["0", 0, 0, 0, 0]},
        {"crc32": [1.5, 0, 0, 0, 0]},
        {"chunk_slots": "2"},
        {"chunk_slots": -2},
        {"chunk_slots": 0},
    ],
    ids=str,
)
def test_a_frame_copy_record_with_damaged_checksums_is_refused_in_one_line(
    tmp_path, small_chunks, record
):
    ring = Ring()
    ring.write(7)
    path = CheckpointStore(tmp_path).save(1, state(1), ring.frames, ring.written)
    sidecar = tmp_path / "frames-0.json"
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), **record}))
    payload = CheckpointStore(tmp_path).read_latest()
    with pytest.raises(CheckpointError) as error:
        CheckpointStore(tmp_path).read_frames(payload, np.zeros(SHAPE, dtype=np.uint8))
    assert str(error.value) == (
        f"checkpoint {path}: the checksums of its replay frames in frames-0.json are damaged; "
        "delete it to resume from the one before"
    )


def test_a_save_over_a_copy_with_damaged_checksums_writes_them_anew(tmp_path, small_chunks):
    store, ring = CheckpointStore(tmp_path, keep=2), Ring()
    for step in (1, 2):
        ring.write(3, first_value=10 * step)
        store.save(step, state(step), ring.frames, ring.written)
    sidecar = tmp_path / "frames-0.json"
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "crc32": [7]}))
    ring.write(4, first_value=50)
    store.save(3, state(3), ring.frames, ring.written)  # copy 0 again
    np.testing.assert_array_equal(loaded(tmp_path)[1], ring.frames)


def test_a_chunk_is_hashed_once_after_it_changes_not_once_per_copy(
    tmp_path, small_chunks, monkeypatch
):
    """Chunks of 2 slots: each save, and a save after a resume, hashes only the chunks slots
    were written in since the last save (or the frames read back), whichever copy it syncs."""
    hashed: list[int] = []

    def crc32(data) -> int:
        chunk = np.frombuffer(data, dtype=np.uint8)
        if chunk.any():  # not a chunk the ring has not reached
            hashed.append(int(chunk[0]))  # the value of its first slot: which chunk
        return zlib.crc32(data)

    monkeypatch.setattr(checkpoints, "zlib", SimpleNamespace(crc32=crc32))
    store, ring = CheckpointStore(tmp_path, keep=2), Ring()
    # Slots 0..7 hold values 1..8 as they are written.
    for step, (count, chunks) in enumerate([(3, [1, 3]), (2, [3, 5]), (3, [5, 7])], start=1):
        hashed.clear()
        ring.write(count, first_value=ring.written + 1)
        store.save(step, state(step), ring.frames, ring.written)
        assert hashed == chunks, step  # the second save writes a whole new copy, the third 5 slots
    resumed = CheckpointStore(tmp_path, keep=2)
    resumed.read_frames(resumed.read_latest(), ring.frames)  # checks chunks 0..3 (4 is zero)
    hashed.clear()
    ring.write(1, first_value=9)
    resumed.save(4, state(4), ring.frames, ring.written)
    assert hashed == [9]
    np.testing.assert_array_equal(loaded(tmp_path)[1], ring.frames)
