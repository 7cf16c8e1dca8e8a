"""A launcher Hydra can import at every start for nothing: Hydra imports every module of the
hydra_plugins namespace when any Hydra app starts, and the launchers that run the project's
sweeps need an optional extra (`joblib`, `slurm`). Each is imported when a sweep uses it."""

from collections.abc import Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class DeferredLauncher(Launcher):
    """Keeps the launcher's parameters; `setup` (once the sweep is checked, before its
    sweeper creates anything) builds `implementation()` with them and sets it up, and
    `launch` hands it the sweep."""

    def __init__(self, **params) -> None:
        self.params = params
        self.launcher: Launcher | None = None

    @staticmethod
    def implementation() -> type[Launcher]:
        raise NotImplementedError

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.launcher = self.implementation()(**self.params)
        self.launcher.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        return self.launcher.launch(job_overrides, initial_job_idx)
