"""A run's state as `torch.save` can store and `torch.load(weights_only=True)` can read: nested
dicts and lists of tensors and plain values, with numpy arrays and bytes tagged as tensors; and
`torch.save` that a crash can never leave half-written."""

import io
from pathlib import Path

import numpy as np
import torch

from artifacts.atomic import write_atomically

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


def torch_bytes(payload) -> memoryview:
    """`payload` as `torch.save` writes it, in memory: serializing before any file changes
    keeps a full disk from leaving an opaque half-written torch file."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getbuffer()


def save_atomically(path: Path, payload) -> None:
    """`torch.save` that a crash can never leave half-written (`write_atomically`)."""
    write_atomically(path, torch_bytes(payload))
