"""What makes the learner fast on a GPU without changing what it computes: page-locked staging
for host-to-device copies, CUDA graphs of fixed-shape calls, and updates in flight."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch


class PinnedStaging:
    """Host-to-device copies of same-shaped numpy arrays into device tensors that stay put.

    `to_device` copies each array into its page-locked host buffer (a plain CPU copy), then
    starts an asynchronous copy into its device buffer and returns the device buffers: the
    same tensor objects on every call while shapes and dtypes stay the same, so a CUDA graph
    can read them. Invariant: a buffer is overwritten only after its previous transfer
    finished; callers guarantee it by waiting for the work that read the previous inputs
    (`DoubleDQN.start_learning` waits for the update in flight first).
    """

    def __init__(self, device: torch.device, pin_memory: bool = True) -> None:
        self.device, self.pin_memory = device, pin_memory
        self.host: list[torch.Tensor] = []
        self.on_device: list[torch.Tensor] = []

    def to_device(self, arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
        sources = [torch.from_numpy(np.ascontiguousarray(array)) for array in arrays]
        layout = [(s.shape, s.dtype) for s in sources]
        if layout != [(b.shape, b.dtype) for b in self.host]:
            self.host = [
                torch.empty(shape, dtype=dtype, pin_memory=self.pin_memory)
                for shape, dtype in layout
            ]
            self.on_device = [torch.empty_like(b, device=self.device) for b in self.host]
        for host, device, source in zip(self.host, self.on_device, sources, strict=True):
            host.copy_(source)
            device.copy_(host, non_blocking=True)
        return self.on_device


class CapturedCall:
    """`function(*inputs)`, replayed from a CUDA graph once it has run `warmup` times eagerly.

    The warm-up calls run on a side stream (cuDNN and cuBLAS pick their workspaces there, as
    capture requires); the next call captures the graph and replays it. Invariants: a graph
    is replayed only for the very tensor objects it was captured with (other inputs are
    captured anew); what a replay returns are the graph's own output tensors, overwritten by
    the next replay. `reset()` forgets the graph, for when `function` would now read other
    tensors than those captured (an optimizer whose state tensors were replaced). Disabled
    (on CPU), it is a plain call.
    """

    def __init__(self, function: Callable, enabled: bool, warmup: int = 3) -> None:
        self.function, self.enabled, self.warmup = function, enabled, warmup
        self.eager_calls = 0
        self.reset()

    def reset(self) -> None:
        self.graph: torch.cuda.CUDAGraph | None = None
        self.inputs: tuple[torch.Tensor, ...] = ()
        self.outputs = None

    def __call__(self, *inputs: torch.Tensor):
        if not self.enabled:
            return self.function(*inputs)
        same_inputs = len(inputs) == len(self.inputs) and all(
            a is b for a, b in zip(inputs, self.inputs, strict=True)
        )
        if self.graph is None or not same_inputs:
            if self.eager_calls < self.warmup:
                self.eager_calls += 1
                return self._warm_up(inputs)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.outputs = self.function(*inputs)
            self.inputs = inputs
        self.graph.replay()  # capture only records: this replay is the call itself
        return self.outputs

    def _warm_up(self, inputs: tuple[torch.Tensor, ...]):
        current = torch.cuda.current_stream()
        side = torch.cuda.Stream(device=current.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            outputs = self.function(*inputs)
        current.wait_stream(side)
        return outputs


class GreedyActions:
    """argmax_a Q(state, a) of one network on a CUDA device, one state at a time, without a
    per-call allocation or a pageable copy: the state goes through a page-locked buffer into a
    fixed device tensor, the forward pass is a `CapturedCall`, and the action comes back
    through a page-locked scalar."""

    def __init__(self, network: torch.nn.Module, device: torch.device, enabled: bool) -> None:
        self.network = network
        self.staging = PinnedStaging(device)
        self.forward = CapturedCall(self._argmax, enabled, warmup=1)
        self.action = torch.empty(1, dtype=torch.int64, pin_memory=True)

    def _argmax(self, states: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.network(states).argmax(dim=1)

    def __call__(self, state: np.ndarray) -> int:
        (states,) = self.staging.to_device([state[None]])
        self.action.copy_(self.forward(states), non_blocking=True)
        torch.cuda.current_stream().synchronize()  # the env needs the action now
        return int(self.action[0])
