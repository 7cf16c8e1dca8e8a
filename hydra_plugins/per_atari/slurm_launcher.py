"""`hydra/launcher=slurm`'s launcher, where Hydra looks for it; the launcher itself is
launch.slurm_launcher's, imported only when a sweep uses it (Hydra imports this module at
the start of every run of train.py, which finds it in the checkout, and it needs the `slurm`
extra)."""

from hydra_plugins.per_atari.deferred_launcher import DeferredLauncher


class SlurmLauncher(DeferredLauncher):
    implementation = "launch.slurm_launcher.PreemptibleSlurmLauncher"
