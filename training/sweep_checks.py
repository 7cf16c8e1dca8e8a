"""A sweep's jobs, checked together before the first one starts, and their directory names.

`SweepChecks` is a Hydra callback (`hydra.callbacks` in configs/config.yaml). Before the
sweeper creates anything, it expands the sweep into its jobs as Hydra's basic sweeper will,
composes each job's config as the launcher will, and checks each as train.py will: a bad job
ends the sweep with one line naming the job and the key, exit status 2 (1 for a config Hydra
cannot compose, as for a single run), and nothing written. Each job still checks itself
when it starts: what depends on the machine (cores, GPUs, memory, disk) is checked here only
for launchers that run the jobs on this machine.

`job_directory_name` names a job's directory (`hydra.sweep.subdir`) after its overrides.
"""

import copy
import hashlib
import sys
from pathlib import Path

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from training.run_config import check_run
from training.run_guard import error_line

# Launchers that run every job on the machine that starts the sweep.
LOCAL_LAUNCHERS = (
    "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
    "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
)
# The longest job directory name, in bytes; file systems allow 255.
NAME_BYTES = 120
DIGEST_CHARACTERS = 8


def job_directory_name(overrides: str) -> str:
    """The job's directory name: its overrides as Hydra joins them (`override_dirname`), with
    "/" as "_" so that a value cannot make the name a path. A longer one than NAME_BYTES is
    cut and ends with "-" and a digest of all of it, so distinct overrides keep distinct
    names; a job without overrides is `run`."""
    name = overrides.replace("/", "_") or "run"
    if len(name.encode()) <= NAME_BYTES:
        return name
    digest = hashlib.sha256(overrides.encode()).hexdigest()[:DIGEST_CHARACTERS]
    kept = name.encode()[: NAME_BYTES - DIGEST_CHARACTERS - 1].decode(errors="ignore")
    return f"{kept}-{digest}"


# Registered on import: Hydra imports this module wherever it resolves a job's directory
# (the sweep's process; a joblib worker or a SLURM job unpickles the callbacks first).
OmegaConf.register_new_resolver("job_directory", job_directory_name, replace=True)


class SweepRefused(ValueError):
    """A job of the sweep would be refused: the message names the job and the key."""


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """Every job's overrides, in job-number order, as Hydra's basic sweeper makes them from
    the sweep's config (its `hydra.sweeper.params`, then the command line's overrides)."""
    sweeper = config.hydra.sweeper
    params = sweeper.get("params") or {}
    arguments = [f"{key}={value}" for key, value in params.items()]
    arguments += OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    loader = GlobalHydra.instance().config_loader()
    overrides = OverridesParser.create(config_loader=loader).parse_overrides(arguments)
    batches = BasicSweeper.split_arguments(overrides, sweeper.get("max_batch_size"))
    return [job for batch in batches for job in batch]


def job_label(number: int, overrides: list[str], shared: set[str]) -> str:
    """`job N (the overrides that tell it from the sweep's other jobs)`."""
    varied = [override for override in overrides if override not in shared] or overrides
    return f"job {number} ({' '.join(varied)})"


def check_job(job: DictConfig, this_machine: bool) -> Path:
    """Raise ValueError as train.py would refuse the job (`job`: its composed config, with
    `hydra.job.num` set); return its run directory."""
    run_dir = Path(job.hydra.sweep.dir) / job.hydra.sweep.subdir
    replay_group = job.hydra.runtime.choices.get("replay")
    cfg = copy.deepcopy(job)  # the task's config, as Hydra's run_job makes it
    with read_write(cfg), open_dict(cfg):
        del cfg["hydra"]
    if cfg.get("resume") is not None:
        raise ValueError(
            f"resume={cfg.resume} is not allowed in a sweep: a resumed run continues in its "
            f"own directory; run it alone with python train.py resume={cfg.resume}"
        )
    check_run(cfg, run_dir, replay_group, this_machine)
    return run_dir


def check_sweep(config: DictConfig) -> None:
    """Raise SweepRefused for the first job that would be refused, or that would share its
    run directory with another job; HydraException for one Hydra cannot compose."""
    str(config.hydra.sweep.dir)  # its ${now:} is resolved once, for every job
    jobs = sweep_jobs(config)
    shared = set.intersection(*(set(job) for job in jobs))
    this_machine = config.hydra.launcher.get("_target_") in LOCAL_LAUNCHERS
    loader = GlobalHydra.instance().config_loader()
    run_dirs: dict[Path, int] = {}
    for number, overrides in enumerate(jobs):
        label = job_label(number, overrides, shared)
        try:
            job = loader.load_sweep_config(config, overrides)
        except (HydraException, OmegaConfBaseException) as error:
            # Hydra's message on one line, without the config search path it appends.
            message = " ".join(str(error).split("\nConfig search path")[0].split())
            raise HydraException(f"{label}: {message}") from None
        with open_dict(job):
            job.hydra.job.num = number
        try:
            run_dir = check_job(job, this_machine)
        except ValueError as error:
            raise SweepRefused(f"{label}: {error_line(error)}") from None
        if run_dir in run_dirs:
            other = run_dirs[run_dir]
            raise SweepRefused(
                f"{label} and {job_label(other, jobs[other], shared)} would share the run "
                f"directory {run_dir}: hydra.job.config.override_dirname.exclude_keys leaves "
                "out a key the sweep varies"
            )
        run_dirs[run_dir] = number


class SweepChecks(Callback):
    """Checks every job of a sweep before the first one starts (see the module's docstring)."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        if config.hydra.sweeper.get("_target_") != f"{BasicSweeper.__module__}.BasicSweeper":
            return  # another sweeper chooses its jobs as it goes: each checks itself
        try:
            check_sweep(config)
        except SweepRefused as error:
            # Hydra turns a callback's exception into a warning and goes on: exit instead.
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)
        except HydraException as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(1)
