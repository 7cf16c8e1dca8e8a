"""The project's launchers, where Hydra looks for them, each for nothing until a sweep uses it:
Hydra imports every module of the hydra_plugins namespace when any Hydra app starts, and the
launchers that run the project's sweeps need an optional extra (`joblib`, `slurm`)."""

import importlib
from collections.abc import Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class DeferredLauncher(Launcher):
    """Keeps the launcher's parameters; `setup` (once the sweep is checked, before its
    sweeper creates anything) imports `implementation`, builds it with them and sets it up,
    and `launch` hands it the sweep."""

    implementation: str  # the launcher's class, by its import path

    def __init__(self, **params) -> None:
        self.params = params
        self.launcher: Launcher | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        module, name = self.implementation.rsplit(".", 1)
        self.launcher = getattr(importlib.import_module(module), name)(**self.params)
        self.launcher.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        return self.launcher.launch(job_overrides, initial_job_idx)


class LocalParallelLauncher(DeferredLauncher):
    """`hydra/launcher=local_parallel`'s and `shared_gpu`'s."""

    implementation = "launch.joblib_launcher.StoppableJoblibLauncher"


class SlurmLauncher(DeferredLauncher):
    """`hydra/launcher=slurm`'s."""

    implementation = "launch.slurm_launcher.PreemptibleSlurmLauncher"
