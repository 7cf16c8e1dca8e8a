"""The integrity of TensorBoard event files. An event file is a TFRecord file: each record is
its data's length (8 bytes, little-endian), the masked CRC-32C of those 8 bytes, the data,
and the masked CRC-32C of the data. TensorBoard's reader stops at the first record that fails
a check without a word, so every later event of the file would silently drop out of a run's
curves: the run directory's readers (a resume, an export) check the records first."""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import google_crc32c

EVENT_FILES = "events.out.tfevents.*"  # the names TensorBoard's writers give them
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER = _LENGTH.size + _CRC.size
_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C, rotated right by 15 bits, plus a constant."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


@dataclass(frozen=True)
class Damage:
    """Where an event file stops being readable: its record `record` (counted from 0), which
    starts at byte `offset`; `problem` says how; `cut_short` when the file merely ends inside
    that record (a write cut off, as by a kill), rather than a record failing its checksum."""

    path: Path
    record: int
    offset: int
    problem: str
    cut_short: bool

    def __str__(self) -> str:
        return (
            f"event file {self.path} is damaged at byte {self.offset}: record {self.record} "
            f"{self.problem}"
        )


def first_damage(path: Path, end: int | None = None) -> Damage | None:
    """The first record of the event file `path` that fails its checks within its first `end`
    bytes (the whole file if None), or None when every record there is whole and checks."""
    size = Path(path).stat().st_size if end is None else min(end, Path(path).stat().st_size)
    if size == 0:
        return None
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        offset, record = 0, 0
        while offset < size:
            problem, cut_short = _record_problem(data, offset, size)
            if problem is not None:
                return Damage(Path(path), record, offset, problem, cut_short)
            (length,) = _LENGTH.unpack_from(data, offset)
            offset, record = offset + _HEADER + length + _CRC.size, record + 1
    return None


def _record_problem(data, offset: int, size: int) -> tuple[str | None, bool]:
    """(what is wrong with the record at `offset`, or None; whether it is only cut short)."""
    if offset + _HEADER > size:
        return "is cut short in its length", True
    length_bytes = data[offset : offset + _LENGTH.size]
    (length_crc,) = _CRC.unpack_from(data, offset + _LENGTH.size)
    if masked_crc32c(length_bytes) != length_crc:
        return "fails the checksum of its length", False
    (length,) = _LENGTH.unpack(length_bytes)
    start = offset + _HEADER
    if start + length + _CRC.size > size:
        return "is cut short in its data", True
    (data_crc,) = _CRC.unpack_from(data, start + length)
    if masked_crc32c(data[start : start + length]) != data_crc:
        return "fails the checksum of its data", False
    return None, False
