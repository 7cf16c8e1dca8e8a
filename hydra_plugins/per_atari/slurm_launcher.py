"""`hydra/launcher=slurm`'s launcher, where Hydra looks for it: training.slurm_launcher's,
imported only when a sweep uses it (it needs the `slurm` extra)."""

from hydra.plugins.launcher import Launcher

from hydra_plugins.per_atari.deferred_launcher import DeferredLauncher


class SlurmLauncher(DeferredLauncher):
    @staticmethod
    def implementation() -> type[Launcher]:
        from training.slurm_launcher import PreemptibleSlurmLauncher

        return PreemptibleSlurmLauncher
