"""Writes that a crash, a kill or a full disk can never leave half-done: a file is written to a
temporary name, fsynced and renamed onto its own, and the directory is fsynced so the rename
itself survives a power cut."""

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
    write_files_atomically({Path(path): data})


def write_files_atomically(files: dict[Path, object]) -> None:
    """Write each file's bytes (`files`: path -> data) as `write_atomically` does, all of them
    to their temporary files before the first is renamed: a write that fails (a full disk)
    leaves every path as it was."""
    temporaries = {path: path.with_name(f".{path.name}.tmp") for path in files}
    try:
        for path, temporary in temporaries.items():
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(descriptor, files[path])
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        for path, temporary in temporaries.items():
            os.replace(temporary, path)
    finally:
        for temporary in temporaries.values():
            temporary.unlink(missing_ok=True)
    for directory in {path.parent for path in files}:
        fsync_directory(directory)
