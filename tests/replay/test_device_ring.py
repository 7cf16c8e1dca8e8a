"""The frame ring's copy on the learner's device (`replay.device`): states of any frame shape
gathered there are the host's, and neither a frame write nor a gather makes more than one
host-to-device transfer. A CPU tensor stands in for the GPU (the same torch code path); the
CUDA case runs where there is one."""

import numpy as np
import pytest
import torch
from test_storage import ring_of_random_episodes
from torch.overrides import TorchFunctionMode

from replay.storage import FrameStorage

CUDA = pytest.param(
    "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
)
HISTORY, FRAME_SHAPE = 3, (2, 3, 3)  # MinAtar-like frames of several channels


def filled(device, steps: int = 90, seed: int = 0) -> FrameStorage:
    """A 32-slot ring written round several times, with episodes of random lengths."""
    return ring_of_random_episodes(32, HISTORY, FRAME_SHAPE, steps, seed, device)


class CountedCopies(TorchFunctionMode):
    """Counts the torch calls that move data between tensors or devices."""

    MOVES = ("copy_", "to", "cuda", "tensor", "as_tensor")

    def __init__(self):
        super().__init__()
        self.moves: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.MOVES:
            self.moves.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_states_of_several_channels_gathered_on_the_device_are_the_hosts(device):
    storage = filled(device)
    slots = np.flatnonzero(storage.sampleable)
    expected = np.zeros((len(slots), HISTORY, *FRAME_SHAPE), np.uint8)
    storage.gather_states(slots, expected)
    assert (expected == 0).any() and (expected != 0).any()  # episode starts are in there
    out = torch.empty(expected.shape, dtype=torch.uint8, device=device)
    np.testing.assert_array_equal(storage.gather_states(slots, out).cpu().numpy(), expected)
    assert torch.equal(storage.device_frames.cpu(), torch.from_numpy(storage.frames))


def test_a_frame_write_and_a_gather_are_one_transfer_each():
    storage = filled("cpu")
    frame = np.full(FRAME_SHAPE, 7, np.uint8)
    with CountedCopies() as counted:
        storage.add(1, 0.0, False, frame)
    assert counted.moves == ["copy_"]
    slots = np.flatnonzero(storage.sampleable)[:8]
    out = torch.empty((2 * len(slots), HISTORY, *FRAME_SHAPE), dtype=torch.uint8)
    for _ in range(2):  # the first gather makes its buffers, the second reuses them
        with CountedCopies() as counted:
            storage.gather_transitions(slots, out)
        assert counted.moves == ["copy_"]
