"""A sweep's jobs, checked together before the first one starts, and their directory names.

`SweepChecks` is a Hydra callback (`hydra.callbacks` in configs/config.yaml). Before the
sweeper creates anything, it expands the sweep into its jobs as Hydra's basic sweeper will,
composes each job's config as the launcher will, and checks each as train.py will: a bad job
ends the sweep with one line naming the job and the key, exit status 2 (1 for a config Hydra
cannot compose, as for a single run), and nothing written. Each job still checks itself
when it starts: what depends on the machine (cores, GPUs, memory, disk) is checked here only
for launchers that run the jobs on this machine.

`job_directory_name` names a job's directory (`hydra.sweep.subdir`) after its overrides, and
`name_jobs_by_varied_keys` leaves out of those names the keys every job of the sweep sets alike.
"""

import copy
import hashlib
import itertools
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from artifacts.run_directory import CONFIG
from launch.run_config import check_run
from launch.run_guard import error_line

# Hydra's default sweeper, as configs name it: the one whose jobs are known before they start.
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
# Launchers that run every job on the machine that starts the sweep.
LOCAL_LAUNCHERS = (
    "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
    "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
    "hydra_plugins.per_atari.local_parallel_launcher.LocalParallelLauncher",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
)
# The longest job directory name, in bytes: file systems allow 255, eCryptfs home directories
# about 143.
NAME_BYTES = 120
DIGEST_CHARACTERS = 8
# A value longer than this is written as its first characters and a digest of all of it, but
# only in a name that would otherwise be too long.
SHORT_VALUE_CHARACTERS = 16


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARACTERS]


def _short_value(line: str, kv_sep: str) -> str:
    """`key=value` with a value past SHORT_VALUE_CHARACTERS as its beginning and its digest."""
    key, separator, value = line.partition(kv_sep)
    if len(value) <= SHORT_VALUE_CHARACTERS:
        return line
    kept = SHORT_VALUE_CHARACTERS - DIGEST_CHARACTERS - 1
    return f"{key}{separator}{value[:kept]}-{_digest(value)}"


def job_directory_name(
    overrides: Sequence[str], exclude_keys: Sequence[str] = (), kv_sep="=", item_sep=","
) -> str:
    """The job's directory name: its overrides but those of `exclude_keys`, as Hydra's
    `hydra.job.override_dirname` joins them (sorted; the separators are its settings), with
    "/" as "_" so that a value cannot make the name a path; a job without one is `run`. A name
    longer than NAME_BYTES writes each long value as its beginning and a digest of it, every
    key still in the name; one still too long (many keys) is cut and ends with "-" and a
    digest of all of it. Distinct overrides keep distinct names either way."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    kept = sorted(o.input_line for o in parsed if o.key_or_group not in exclude_keys)
    lines = [line.replace("=", kv_sep) for line in kept]
    name = item_sep.join(lines).replace("/", "_") or "run"
    if len(name.encode()) <= NAME_BYTES:
        return name
    short = item_sep.join(_short_value(line, kv_sep) for line in lines).replace("/", "_")
    if len(short.encode()) <= NAME_BYTES:
        return short
    kept = name.encode()[: NAME_BYTES - DIGEST_CHARACTERS - 1].decode(errors="ignore")
    return f"{kept}-{_digest(name)}"


def _job_directory(overrides: ListConfig, dirname: DictConfig) -> str:
    """`hydra.sweep.subdir`'s resolver: the job's overrides (`hydra.overrides.task`) named
    with Hydra's `hydra.job.config.override_dirname` settings."""
    return job_directory_name(
        list(overrides), list(dirname.exclude_keys), dirname.kv_sep, dirname.item_sep
    )


# Registered on import: Hydra imports this module wherever it resolves a job's directory
# (the sweep's process; a joblib worker or a SLURM job unpickles the callbacks first).
OmegaConf.register_new_resolver("job_directory", _job_directory, replace=True)


def name_jobs_by_varied_keys(config: DictConfig, jobs: list[list[str]]) -> None:
    """Leave the keys every job sets alike out of the job directory names, so that they show
    what the sweep varies: added to `hydra.job.config.override_dirname.exclude_keys` (beside
    the user's own) in the sweep's config and in the overrides each job is composed with
    (recorded in multirun.yaml). Follows from the command alone: the same command names its
    jobs the same way, which is how a sweep is resumed. A sweep of one job keeps its
    overrides in its name."""
    if len(jobs) < 2:
        return
    parser = OverridesParser.create()
    lines = [{o.key_or_group: o.input_line for o in parser.parse_overrides(job)} for job in jobs]
    shared = [key for key, line in lines[0].items() if all(job.get(key) == line for job in lines)]
    dirname = config.hydra.job.config.override_dirname
    excluded = list(dict.fromkeys([*dirname.exclude_keys, *sorted(shared)]))
    listed = ",".join(f"'{key}'" for key in excluded)
    with read_write(config), open_dict(config):
        dirname.exclude_keys = excluded
        config.hydra.overrides.hydra.append(
            f"hydra.job.config.override_dirname.exclude_keys=[{listed}]"
        )


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
    # Each key once, a later override of it replacing an earlier one in the earlier's place;
    # the jobs are the product of the keys' values, in that order.
    values: dict[str, list[str]] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise HydraException(f"the basic sweeper cannot sweep {override.input_line}")
    return [list(job) for job in itertools.product(*values.values())]


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


def check_sweep(config: DictConfig, jobs: list[list[str]]) -> list[Path]:
    """Raise SweepRefused for the first of `jobs` (`sweep_jobs`) that would be refused, or
    that would share its run directory with another job; HydraException for one Hydra cannot
    compose. Returns the runs in the sweep directory that no job is named for (another
    sweep's, or this one's under other names: a key that starts or stops varying renames
    the jobs)."""
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
    sweep_dir = Path(config.hydra.sweep.dir)
    found = sorted(path.parent for path in sweep_dir.glob(f"*/{CONFIG}"))
    return [path for path in found if path not in run_dirs]


class SweepChecks(Callback):
    """Checks every job of a sweep before the first one starts (see the module's docstring)."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
            return  # another sweeper chooses its jobs as it goes: each checks itself
        str(config.hydra.sweep.dir)  # its ${now:} is resolved once, for every job
        try:
            jobs = sweep_jobs(config)
            name_jobs_by_varied_keys(config, jobs)
            unclaimed = check_sweep(config, jobs)
        except SweepRefused as error:
            # Hydra turns a callback's exception into a warning and goes on: exit instead.
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)
        except HydraException as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(1)
        if unclaimed:
            print(
                f"note: {config.hydra.sweep.dir} holds runs that no job of this sweep is named "
                f"for, left as they are: {', '.join(path.name for path in unclaimed)} (jobs are "
                "named by the keys the sweep varies)",
                file=sys.stderr,
            )
