"""Shared fixtures of the evaluation tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Batch-1 acting is fastest on one thread, and much faster than two on a busy 2-core
    machine (measured 3 ms vs 100 ms per action)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
