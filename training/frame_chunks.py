"""Which slots of the replay's ring a frame copy must be brought up to date in, and which of
its checksum chunks they touch: the arithmetic of `training.checkpoints`, on the ring order its
docstring states."""


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
