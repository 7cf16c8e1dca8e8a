"""`agent.torch_compile`: the learner's whole update compiled by `torch.compile`, which fuses
the many small operations that bound a small network's update (docs/benchmarks.md): the same
arithmetic, rounded differently, so a run keeps the setting from its first step to its last."""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from tqdm import tqdm

# cpp_wrapper: the compiled graph's kernels are called from generated C++ rather than Python,
# the same kernels (the same results) with less overhead per call (docs/benchmarks.md#minatar).
COMPILE_OPTIONS = {"cpp_wrapper": True}


class CompiledUpdate:
    """`update` (`DoubleDQN.update`) compiled at its first call, before anything runs. If
    compiling fails this warns in one line, keeps the cause in `failure` (a run records it)
    and calls `update` itself from then on, from the same state. `options` (Inductor's)
    replace COMPILE_OPTIONS' where given (benchmarks/update_step.py)."""

    def __init__(self, update: Callable, options: dict | None = None) -> None:
        self.update, self.options = update, COMPILE_OPTIONS | (options or {})
        self._compiled: Callable | None = None
        self.failure: str | None = None  # why compiling failed, once it has

    def __call__(self, *arguments) -> torch.Tensor:
        if self.failure is None:
            try:
                if self._compiled is None:
                    # Dynamo traces `torch.autograd.grad` into the graph only when asked (by
                    # default it breaks the graph there), process-wide: then the graph is the
                    # one `torch.func.grad` gives, bit for bit.
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
    """The type and first line of the innermost error of `error`'s chain: the cause, where
    ending a capture that an operation broke reports only that the capture was invalidated.
    How a failure that the run carries on after is told (a compiler's, a CUDA graph's, an
    evaluation worker's)."""
    chain = [error]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) and inner not in chain:
        chain.append(inner)
    error = chain[-1]
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
