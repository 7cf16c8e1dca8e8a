"""`agent.torch_compile`: the learner's whole update (forward, gradients, the optimizer's rule)
compiled by `torch.compile`, which fuses the many small operations that bound a small
network's update (MinAtar's: docs/benchmarks.md). The same arithmetic, rounded differently:
like any setting that changes results, a run keeps it from its first step to its last."""

from __future__ import annotations

import sys
import weakref

import torch
from tqdm import tqdm

from agents.acceleration import error_line

# cpp_wrapper: the compiled graph's kernels are called from generated C++ rather than Python,
# the same kernels (the same results) with less overhead per call (docs/benchmarks.md#minatar).
COMPILE_OPTIONS = {"cpp_wrapper": True}


class CompiledUpdate:
    """A callable with the arguments and result of `learner.update_step` that runs
    `learner.traced_update_step` compiled.

    Compiling happens at the first call, before anything runs: if it fails (no C++ compiler,
    an operation the compiler does not support), this prints one line (the cause, then
    "continuing without torch.compile"), keeps the cause in `failure` (a training run records
    it: `training.run_record`) and calls `update_step` from then on, which starts from the
    same parameters and statistics. The learner is held weakly, so a learner holding
    its CompiledUpdate forms no reference cycle. `options` (Inductor's, as torch.compile's)
    replace COMPILE_OPTIONS' where given: for benchmarks/update_step.py."""

    def __init__(self, learner, options: dict | None = None) -> None:
        self._learner = weakref.ref(learner)
        self._compiled = torch.compile(
            type(learner).traced_update_step,
            dynamic=False,
            options=COMPILE_OPTIONS | (options or {}),
        )
        self.enabled = True
        self.failure: str | None = None  # why compiling failed, once it has

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        learner = self._learner()
        if self.enabled:
            params = list(learner.online.parameters())
            grad_avgs, square_avgs = learner.optimizer.statistics(params)
            try:
                return self._compiled(learner, params, grad_avgs, square_avgs, *inputs)
            except Exception as error:  # noqa: BLE001 - any failure of the compiler
                self.enabled = False
                self.failure = error_line(error)
                tqdm.write(  # above a training run's progress bar, not on its line
                    f"warning: torch.compile of the update failed ({self.failure}); "
                    "continuing without torch.compile",
                    file=sys.stderr,
                )
        return learner.update_step(*inputs)
