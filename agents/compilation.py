"""`agent.torch_compile`: the learner's update compiled whole, its many small operations fused
(docs/benchmarks.md); rounded differently, so a run keeps the setting from first step to last."""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from tqdm import tqdm

# cpp_wrapper: the compiled graph's kernels are called from generated C++ rather than Python,
# the same kernels (the same results) with less overhead per call (docs/benchmarks.md#minatar).
COMPILE_OPTIONS = {"cpp_wrapper": True}


class CompiledUpdate:
    """`update` (`DoubleDQN.update`) compiled at its first call, before anything runs; where
    compiling fails, a one-line warning, the cause in `failure` (a run records it) and `update`
    itself from then on. `options` (Inductor's) replace COMPILE_OPTIONS' where given."""

    def __init__(self, update: Callable, options: dict | None = None) -> None:
        self.update, self.options = update, COMPILE_OPTIONS | (options or {})
        self._compiled: Callable | None = None
        self.failure: str | None = None  # why compiling failed, once it has

    def __call__(self, *arguments) -> torch.Tensor:
        if self.failure is None:
            try:
                if self._compiled is None:
                    # Dynamo traces `torch.autograd.grad` into the graph (rather than breaking
                    # it there) only when asked, process-wide: torch.func.grad's graph, exactly.
                    torch._dynamo.config.trace_autograd_ops = True
                    self._compiled = torch.compile(self.update, dynamic=False, options=self.options)
                return self._compiled(*arguments)
            except Exception as error:  # noqa: BLE001 - any failure of the compiler
                self.failure = error_line(error)
                tqdm.write(  # above a training run's progress bar, not on its line
                    f"warning: torch.compile of the update failed ({self.failure}); "
                    "continuing without torch.compile",
                    file=sys.stderr,
                )
        return self.update(*arguments)


def error_line(error: BaseException) -> str:
    """The type and first line of the innermost error of `error`'s chain (ending a capture that
    an operation broke reports only that the capture was invalidated): how a failure that the
    run carries on after is told (a compiler's, a CUDA graph's, an evaluation worker's)."""
    chain = [error]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) and inner not in chain:
        chain.append(inner)
    error = chain[-1]
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
