"""`hydra/launcher=slurm`'s launcher, where Hydra looks for it; the launcher itself is
training.slurm_launcher's, imported only when a sweep uses it (Hydra imports this module at
the start of every run of train.py, which finds it in the checkout, and it needs the `slurm`
extra)."""

from collections.abc import Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class SlurmLauncher(Launcher):
    def __init__(self, **params) -> None:
        self.params = params
        self.setup_arguments: dict = {}

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.setup_arguments = dict(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from training.slurm_launcher import PreemptibleSlurmLauncher

        launcher = PreemptibleSlurmLauncher(**self.params)
        launcher.setup(**self.setup_arguments)
        return launcher.launch(job_overrides, initial_job_idx)
