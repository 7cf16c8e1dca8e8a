"""`hydra/launcher=local_parallel`'s and `shared_gpu`'s launcher, where Hydra looks for it:
launch.joblib_launcher's, imported only when a sweep uses it (it needs the `joblib` extra)."""

from hydra_plugins.per_atari.deferred_launcher import DeferredLauncher


class LocalParallelLauncher(DeferredLauncher):
    implementation = "launch.joblib_launcher.StoppableJoblibLauncher"
