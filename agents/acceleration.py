"""The CUDA corner, which only a CUDA learner or policy imports: page-locked staging, CUDA graphs
that give way to the eager call where untrusted (docs/gpu.md), the updates' stream, acting."""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from agents.compilation import error_line
from agents.updates import PendingLearn, held, update_inputs

# How far a first replay may lie from the eager call: rounding, not a stale input or constant.
GRAPH_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

# The kinds of captured call (the update, acting) whose graph gave up here: the others would too.
GRAPHS_GIVEN_UP: set[str] = set()


class PinnedStaging:
    """Copies of numpy arrays through page-locked buffers (unless page-locked already) into
    device tensors, the same objects while shapes and dtypes are (for a CUDA graph). Callers
    wait for the work that read the previous inputs first: no buffer is overwritten mid-read."""

    def __init__(self, device: torch.device, pin_memory: bool = True) -> None:
        self.device, self.pin_memory = device, pin_memory
        self.host: list[torch.Tensor] = []
        self.on_device: list[torch.Tensor] = []

    def to_device(self, arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
        sources = [torch.from_numpy(np.ascontiguousarray(array)) for array in arrays]
        layout = [(s.shape, s.dtype) for s in sources]
        if layout != [(b.shape, b.dtype) for b in self.host]:
            self.host = [torch.empty(s, dtype=d, pin_memory=self.pin_memory) for s, d in layout]
            self.on_device = [torch.empty_like(b, device=self.device) for b in self.host]
        for host, device, source in zip(self.host, self.on_device, sources, strict=True):
            if not source.is_pinned():
                host.copy_(source)
                source = host
            device.copy_(source, non_blocking=True)
        return self.on_device


def capture_cuda_graph(function: Callable, inputs: tuple, stream) -> Callable[[], torch.Tensor]:
    """Record `function(*inputs)` into a CUDA graph on `stream` (recording runs nothing); the
    replay runs it on the current stream and returns the graph's output tensor."""
    graph, caller = torch.cuda.CUDAGraph(), torch.cuda.current_stream()
    try:
        with torch.cuda.graph(graph, stream=stream):
            output = function(*inputs)
    finally:
        # torch.cuda.graph leaves its capture stream current where beginning or ending raises.
        torch.cuda.set_stream(caller)

    def replay() -> torch.Tensor:
        graph.replay()
        return output

    return replay


class CapturedCall:
    """`function(*inputs)` (a tensor) from a CUDA graph, after `warmup` eager calls on its own
    stream, the capture there and its check (docs/gpu.md): the first replay and an eager call
    from the same `state()` (the tensors `function` changes in place) agree within
    GRAPH_TOLERANCE; the eager result is kept. A capture that raises or fails the check warns
    once and leaves every call of this `name` eager. A graph replays only for its inputs and
    `constants()` (the Python numbers `function` reads), else (and after `reset()`) is captured
    anew; a replay's output is overwritten by the next; bound methods are held weakly."""

    def __init__(
        self,
        function: Callable[..., torch.Tensor],
        *,
        name: str,
        enabled: bool,
        device: torch.device | None = None,
        warmup: int = 3,
        state: Callable[[], Sequence[Sequence[torch.Tensor]]] = tuple,
        constants: Callable[[], Any] = tuple,
        capture: Callable = capture_cuda_graph,
    ) -> None:
        self.name, self.enabled, self.device, self.warmup = name, enabled, device, warmup
        self._function, self._state, self._constants = map(held, (function, state, constants))
        self._capture = capture
        cuda = device is not None and device.type == "cuda"
        self._stream = torch.cuda.Stream(device) if cuda and enabled else None
        self.reset()

    def reset(self) -> None:
        self._graph: tuple | None = None  # (its replay, the inputs it reads, constants())
        self.eager_calls = 0

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self.name in GRAPHS_GIVEN_UP:
            self.enabled = False
        if not self.enabled:
            return self._function()(*inputs)
        if self._graph is not None:
            replay, captured_inputs, constants = self._graph
            same_inputs = list(map(id, inputs)) == list(map(id, captured_inputs))
            if same_inputs and self._constants()() == constants:
                return replay()
            self.reset()
        if self.eager_calls < self.warmup:
            self.eager_calls += 1
            return self._eager(inputs)
        return self._capture_and_check(inputs)

    def _capture_and_check(self, inputs: tuple) -> torch.Tensor:
        state = [tensor for tensors in self._state()() for tensor in tensors]
        before = [tensor.detach().clone() for tensor in state]
        try:
            replay = self._capture(self._function(), inputs, self._stream)
            replayed = [tensor.detach().clone() for tensor in [replay(), *state]]
        except Exception as error:  # capture and replay raise many types; all mean "eager"
            self._give_up(error_line(error))
            _restore(state, before)  # a replay may have run part-way
            return self._eager(inputs)
        _restore(state, before)
        output = self._eager(inputs)
        difference = _difference(replayed, [output, *state])
        if difference is not None:
            self._give_up(f"its first replay differs from the eager call by up to {difference:g}")
            return output
        self._graph = (replay, inputs, self._constants()())
        return output

    def _give_up(self, cause: str) -> None:
        self.enabled = False
        GRAPHS_GIVEN_UP.add(self.name)
        tqdm.write(  # above a training run's progress bar, not on its line
            f"warning: the CUDA graph of {self.name} failed ({cause}): "
            "continuing without CUDA graphs",
            file=sys.stderr,
        )

    def _eager(self, inputs: tuple) -> torch.Tensor:
        """On this call's own stream, after the caller's work so far and before its next."""
        if self._stream is None:
            return self._function()(*inputs)
        current = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(current)
        with torch.cuda.stream(self._stream):
            output = self._function()(*inputs)
        current.wait_stream(self._stream)
        return output


def _restore(tensors, saved: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for tensor, value in zip(tensors, saved, strict=True):
            tensor.copy_(value)


def _difference(expected: list[torch.Tensor], actual: list[torch.Tensor]) -> float | None:
    """None when every pair agrees within GRAPH_TOLERANCE (NaN with NaN); else the largest
    absolute difference (inf for other shapes, dtypes or NaNs)."""
    if [(t.shape, t.dtype) for t in expected] != [(t.shape, t.dtype) for t in actual]:
        return math.inf
    gaps = [
        (a.double() - b.double()).abs().nan_to_num(math.inf).max().item()
        for a, b in zip(expected, actual, strict=True)
        if not torch.allclose(a, b, equal_nan=True, **GRAPH_TOLERANCE)
    ]
    return max(gaps, default=None)


def captured_update(learner, enabled: bool, capture: Callable = capture_cuda_graph) -> CapturedCall:
    """The learner's `update_step` as a CapturedCall on its device, graphs when `enabled`."""
    return CapturedCall(
        learner.update_step,
        name="the update",
        enabled=enabled,
        device=learner.device,
        state=learner.update_state,
        constants=learner.update_constants,
        capture=capture,
    )


class CudaUpdates:
    """The CUDA learner's updates (`captured_update`) from staged inputs, on a stream of their
    own, their summary copied back behind an event; at most one in flight. Acting waits for it
    all, or with `pipelined` for the copy of the online parameters into `behaviour` alone."""

    def __init__(self, learner, graphs: bool, pipelined: bool) -> None:
        self.update = captured_update(learner, graphs)
        self.online = learner.online
        self.behaviour = copy.deepcopy(self.online).requires_grad_(False) if pipelined else None
        self.staging = PinnedStaging(learner.device)
        self.stream = torch.cuda.Stream(learner.device)
        self.summary_host = torch.empty(0, pin_memory=True)
        self._pending: PendingLearn | None = None

    def start(self, batch, batch_size: int) -> PendingLearn:
        self.wait()  # the staging buffers are the previous update's inputs until it is done
        inputs = update_inputs(batch, self.staging.to_device)
        current, stream = torch.cuda.current_stream(), self.stream
        stream.wait_stream(current)  # the inputs have been copied
        if self.behaviour is not None:
            behaviour, online = list(self.behaviour.parameters()), list(self.online.parameters())
            with torch.cuda.stream(stream), torch.no_grad():
                torch._foreach_copy_(behaviour, online)
            current.wait_stream(stream)
        with torch.cuda.stream(stream):
            summary = self.update(*inputs)
            if self.summary_host.shape != summary.shape:
                self.summary_host = torch.empty(summary.shape, pin_memory=True)
            host = self.summary_host
            host.copy_(summary, non_blocking=True)
            summary.record_stream(stream)  # made on the captured call's stream, read on this
            done = torch.cuda.Event()
            done.record()
        if self.behaviour is None:
            current.wait_stream(stream)

        def wait_for_summary() -> np.ndarray:
            done.synchronize()
            return host.numpy()

        self._pending = PendingLearn(wait_for_summary, batch_size)
        return self._pending

    def wait(self) -> None:
        """Wait for the update in flight, if any (its stats stay with its `PendingLearn`)."""
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def reset(self) -> None:
        self.wait()
        self.update.reset()


class GreedyActions:
    """argmax_a Q(state, a) of `network` for one state, without a per-call allocation or a
    pageable copy; the forward pass is a `CapturedCall`."""

    def __init__(self, network: torch.nn.Module, device: torch.device, graphs: bool) -> None:
        self.network = network
        self.staging = PinnedStaging(device)
        self.q_values = CapturedCall(
            self._q_values, name="acting", enabled=graphs, device=device, warmup=1
        )
        self.action = torch.empty(1, dtype=torch.int64, pin_memory=True)

    def _q_values(self, states: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.network(states)

    def __call__(self, state: np.ndarray) -> int:
        (states,) = self.staging.to_device([state[None]])
        self.action.copy_(self.q_values(states).argmax(dim=1), non_blocking=True)
        torch.cuda.current_stream().synchronize()  # the env needs the action now
        return int(self.action[0])
