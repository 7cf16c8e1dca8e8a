"""Writes that a crash, a kill or a full disk can never leave half-done: a file is written to a
temporary name, fsynced and renamed onto its own, and the directory is fsynced so the rename
itself survives a power cut."""

import io
import os
from pathlib import Path

CHUNK_BYTES = 64 << 20


def fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_all(descriptor: int, data, offset: int | None = None) -> None:
    """Write every byte of `data` (at `offset` with pwrite, else at the file position), in
    chunks; a short write, as on a filling disk, is continued until the OS raises."""
    view = memoryview(data).cast("B")
    written = 0
    while written < len(view):
        chunk = view[written : written + CHUNK_BYTES]
        if offset is None:
            written += os.write(descriptor, chunk)
        else:
            written += os.pwrite(descriptor, chunk, offset + written)


def write_atomically(path: Path, data) -> None:
    """Write the bytes `data` to a temporary file, fsync it and rename it onto `path`."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(descriptor, data)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    fsync_directory(path.parent)


def torch_bytes(payload) -> memoryview:
    """`payload` as `torch.save` writes it, in memory: serializing before any file changes
    keeps a full disk from leaving an opaque half-written torch file."""
    import torch  # here: the reports write atomically without loading torch

    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getbuffer()


def save_atomically(path: Path, payload) -> None:
    """`torch.save` that a crash can never leave half-written."""
    write_atomically(path, torch_bytes(payload))
