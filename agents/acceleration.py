"""What makes the agent fast on a GPU without changing what it computes: page-locked staging
for host-to-device copies, and CUDA graphs of fixed-shape calls that give way to the eager call
whenever a graph cannot be trusted."""

from __future__ import annotations

import inspect
import math
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

# How far a graph's first replay may lie from the eager call on the same inputs and state:
# float rounding (the same kernels, perhaps summing in another order), far below what a stale
# input, a lost update or a wrong constant changes.
GRAPH_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

# The names of the kinds of captured call (the update, acting) whose graph gave up in this
# process: the others of the kind, such as the policy the evaluation worker builds for each
# test, would most likely fail alike, and each would warn again.
GRAPHS_GIVEN_UP: set[str] = set()

Replay = Callable[[], Any]
# (function, inputs, the stream to capture on or None) -> the replay of the recorded call.
Capture = Callable[[Callable, tuple, Any], Replay]


class PinnedStaging:
    """Host-to-device copies of same-shaped numpy arrays into device tensors that stay put.

    `to_device` copies each array into its page-locked host buffer (a plain CPU copy), then
    starts an asynchronous copy into its device buffer and returns the device buffers: the
    same tensor objects on every call while shapes and dtypes stay the same, so a CUDA graph
    can read them. An array that is page-locked already (the replay gathers its states into
    such memory) is copied to the device from where it is, without the host copy.
    Invariant: a buffer, and a caller's page-locked array, is overwritten only after its
    previous transfer finished; callers guarantee it by waiting for the work that read the
    previous inputs (`CudaUpdates.start` waits for the update in flight first; the replay
    draws its next batch only once the update of the last one is done).
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
            if not source.is_pinned():
                host.copy_(source)
                source = host
            device.copy_(source, non_blocking=True)
        return self.on_device


def capture_cuda_graph(function: Callable, inputs: tuple, stream) -> Replay:
    """Record `function(*inputs)` into a CUDA graph on `stream` (recording runs nothing).
    The replay runs the graph on the current stream and returns the graph's output tensors."""
    graph, caller = torch.cuda.CUDAGraph(), torch.cuda.current_stream()
    try:
        with torch.cuda.graph(graph, stream=stream):
            outputs = function(*inputs)
    finally:
        # torch.cuda.graph leaves its capture stream current when beginning or ending the
        # capture raises; the caller's work must go on on the caller's stream.
        torch.cuda.set_stream(caller)

    def replay():
        graph.replay()
        return outputs

    return replay


class CapturedCall:
    """`function(*inputs)`, replayed from a CUDA graph once the graph is known to compute what
    the eager call computes.

    The life of a graph: `warmup` eager calls on this call's own stream (cuDNN and cuBLAS pick
    their workspaces there, as capture requires; no two captured calls share a stream, so
    graphs replaying concurrently never share a workspace), the capture on that stream, and
    one check: the first replay and an eager call on the same inputs, both from the values
    `state()` had before (the tensors `function` changes in place), must agree within
    GRAPH_TOLERANCE. The eager call is that call's result, so `state` changes once. Then
    replays.

    A capture or first replay that raises, or a check that fails, prints one line (the cause,
    then "continuing without CUDA graphs") and the call stays eager from then on, as does
    every call of the same `name` in this process (GRAPHS_GIVEN_UP), without trying or
    warning again. A capture runs nothing, so the eager call gives the same result.

    Invariants: a graph is replayed only for the very tensor objects it was captured with, and
    only while `constants()` (the Python numbers `function` reads, which a graph bakes in)
    equals its value at capture; otherwise a new warm-up and capture follow, as after
    `reset()` (for when `function` would now read other tensors than the captured ones). A
    replay returns the graph's own output tensors, overwritten by the next replay. Bound
    methods are held weakly, so an owner holding its CapturedCall forms no reference cycle
    and is freed, its graph with it, as soon as it is unreachable. Disabled (on CPU, or with
    graphs off), it is a plain call.
    """

    def __init__(
        self,
        function: Callable,
        *,
        name: str,
        enabled: bool,
        device: torch.device | None = None,
        warmup: int = 3,
        state: Callable[[], Sequence[torch.Tensor]] | None = None,
        constants: Callable[[], Any] | None = None,
        capture: Capture = capture_cuda_graph,
    ) -> None:
        self.name, self.enabled, self.device, self.warmup = name, enabled, device, warmup
        self._function = _held(function)
        self._state = _held(state or (lambda: ()))
        self._constants = _held(constants or (lambda: None))
        self._capture = capture
        self._stream = None
        self.reset()

    def reset(self) -> None:
        self._replay: Replay | None = None
        self._inputs: tuple = ()
        self._captured_constants = None
        self.eager_calls = 0

    def __call__(self, *inputs: torch.Tensor):
        if self.name in GRAPHS_GIVEN_UP:
            self.enabled = False
        if not self.enabled:
            return self._function()(*inputs)
        if self._replay is not None and not self._may_replay(inputs):
            self.reset()
        if self._replay is not None:
            return self._replay()
        if self.eager_calls < self.warmup:
            self.eager_calls += 1
            return self._eager(inputs)
        return self._capture_and_check(inputs)

    def _may_replay(self, inputs: tuple) -> bool:
        same = len(inputs) == len(self._inputs) and all(
            a is b for a, b in zip(inputs, self._inputs, strict=True)
        )
        return same and self._constants()() == self._captured_constants

    def _capture_and_check(self, inputs: tuple):
        state = self._state()
        before = _clones(state())
        try:
            replay = self._capture(self._function(), inputs, self._own_stream())
            replayed = _clones([*_tensors(replay()), *state()])
        except Exception as error:  # capture and replay raise many types; all mean "eager"
            self._give_up(error_line(error))
            _restore(state(), before)  # a replay may have run part-way
            return self._eager(inputs)
        _restore(state(), before)
        outputs = self._eager(inputs)
        difference = _difference(replayed, [*_tensors(outputs), *state()])
        if difference is not None:
            self._give_up(f"its first replay differs from the eager call by up to {difference:g}")
            return outputs
        self._replay, self._inputs = replay, inputs
        self._captured_constants = self._constants()()
        return outputs

    def _give_up(self, cause: str) -> None:
        self.enabled = False
        GRAPHS_GIVEN_UP.add(self.name)
        tqdm.write(  # above a training run's progress bar, not on its line
            f"warning: the CUDA graph of {self.name} failed ({cause}): "
            "continuing without CUDA graphs",
            file=sys.stderr,
        )

    def _own_stream(self):
        if self._stream is None and self.device is not None and self.device.type == "cuda":
            self._stream = torch.cuda.Stream(self.device)
        return self._stream

    def _eager(self, inputs: tuple):
        """The eager call on this call's own stream, after the caller's work so far and before
        the caller's next."""
        stream = self._own_stream()
        if stream is None:
            return self._function()(*inputs)
        current = torch.cuda.current_stream(self.device)
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            outputs = self._function()(*inputs)
        current.wait_stream(stream)
        return outputs


def _held(function: Callable) -> Callable[[], Callable]:
    """A callable that returns `function`; weakly for a bound method (no reference to its
    object, which may own the holder)."""
    if inspect.ismethod(function):
        return weakref.WeakMethod(function)
    return lambda: function


def _tensors(outputs) -> list[torch.Tensor]:
    return list(outputs) if isinstance(outputs, tuple | list) else [outputs]


def _clones(tensors) -> list[torch.Tensor]:
    return [tensor.detach().clone() for tensor in tensors]


def _restore(tensors, saved: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for tensor, value in zip(tensors, saved, strict=True):
            tensor.copy_(value)


def _difference(expected: list[torch.Tensor], actual: list[torch.Tensor]) -> float | None:
    """None when every pair agrees within GRAPH_TOLERANCE (integers exactly, NaN with NaN);
    else the largest absolute difference (inf for mismatched shapes or NaNs)."""
    if len(expected) != len(actual):
        return math.inf
    largest = None
    for a, b in zip(expected, actual, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            return math.inf
        if a.is_floating_point():
            close = torch.allclose(a, b, equal_nan=True, **GRAPH_TOLERANCE)
        else:
            close = torch.equal(a, b)
        if not close:
            gap = (a.double() - b.double()).abs().nan_to_num(math.inf).max().item()
            largest = gap if largest is None else max(largest, gap)
    return largest


def error_line(error: BaseException) -> str:
    """The type and first line of the innermost error of `error`'s chain: the cause, where
    ending a capture that an operation broke reports only that the capture was invalidated."""
    chain = [error]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) and inner not in chain:
        chain.append(inner)
    error = chain[-1]
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
