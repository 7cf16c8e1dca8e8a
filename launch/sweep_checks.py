"""A sweep's jobs, checked together before the first one starts, and their directory names.

`SweepChecks` (a Hydra callback: `hydra.callbacks` in configs/config.yaml) checks every job of
the sweep as train.py will, then the jobs together, before the sweeper creates anything
(docs/sweeps.md); each job still checks itself when it starts. `job_directory_name` names a
job's directory (`hydra.sweep.subdir`) after the overrides the sweep varies
(`name_jobs_by_varied_keys`).
"""

import copy
import hashlib
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from hydra.utils import get_class
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from artifacts.command_line import size_text
from artifacts.run_directory import CONFIG, RunDirectory
from launch.run_config import check_run
from launch.run_guard import disk_needs, error_line
from training.run_record import config_record
from training.settings import Run

# Launchers that run every job on the machine that starts the sweep, by their names in
# `hydra/launcher=...`: Hydra's own, joblib's, the project's and submitit's local one.
LOCAL_LAUNCHERS = ("basic", "joblib", "local_parallel", "shared_gpu", "submitit_local")
# A stop's exit status, a sweep's and train.py's (`report_stop`): 0 after SIGTERM, so a
# scheduler counts its preempted job as done and requeues it.
STOP_STATUS = {signal.SIGTERM: 0, signal.SIGINT: 130}
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


def sweep_overrides(config: DictConfig) -> list[Override]:
    """The sweep's overrides as its sweeper reads them: its `hydra.sweeper.params`, then the
    command line's."""
    params = config.hydra.sweeper.get("params") or {}
    arguments = [f"{key}={value}" for key, value in params.items()]
    arguments += OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    loader = GlobalHydra.instance().config_loader()
    return OverridesParser.create(config_loader=loader).parse_overrides(arguments)


def sweep_jobs(config: DictConfig) -> list[list[str]] | None:
    """Every job's overrides, in job-number order, as the sweeper makes them: Hydra's basic
    sweeper splits the sweep's overrides into batches of jobs with its `split_arguments`, and
    runs the batches one after the other. None for a sweeper without that split: one that
    chooses its jobs as it goes."""
    sweeper = config.hydra.sweeper
    split = getattr(get_class(sweeper._target_), "split_arguments", None)
    if split is None:
        return None
    batches = split(sweep_overrides(config), sweeper.get("max_batch_size"))
    return [job for batch in batches for job in batch]


def repeated_values(config: DictConfig) -> str:
    """The sweep's overrides that list a value twice as Hydra reads them (0.00025,2.5e-4)."""
    sweeps = [o for o in sweep_overrides(config) if o.is_sweep_override()]
    values = [list(sweep.sweep_string_iterator()) for sweep in sweeps]
    return " ".join(
        o.input_line for o, v in zip(sweeps, values, strict=True) if len(set(v)) < len(v)
    )


def job_labels(jobs: dict[int, Sequence[str]]) -> dict[int, str]:
    """Each job's `job N (the overrides that tell it from the sweep's other jobs)`, by its
    number."""
    shared = set.intersection(*(set(overrides) for overrides in jobs.values()))
    labels = {}
    for number, overrides in jobs.items():
        varied = [override for override in overrides if override not in shared] or overrides
        labels[number] = f"job {number} ({' '.join(varied)})"
    return labels


@dataclass(frozen=True)
class CheckedJob:
    """A job as train.py would run it: its run directory, settings and config (`record`:
    what its config.yaml holds), and whether that run is finished."""

    run_dir: Path
    run: Run
    record: dict
    done: bool


def check_job(job: DictConfig, this_machine: bool) -> CheckedJob:
    """Raise ValueError as train.py would refuse the job (`job`: its composed config, with
    `hydra.job.num` set)."""
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
    run, done = check_run(cfg, run_dir, replay_group, this_machine)
    return CheckedJob(run_dir, run, config_record(cfg), done)


def jobs_at_once(config: DictConfig, count: int) -> int:
    """How many of the sweep's `count` jobs its launcher runs at the same time: one for
    Hydra's basic launcher, `hydra.launcher.n_jobs` as joblib counts it (-1: every core) for
    a joblib launcher, every job for another (submitit's local launcher)."""
    if config.hydra.runtime.choices.get("hydra/launcher") == "basic":
        return 1
    n_jobs = config.hydra.launcher.get("n_jobs")
    if n_jobs is None:
        return count
    from joblib import effective_n_jobs  # installed with the joblib launchers

    return min(count, effective_n_jobs(n_jobs))


def check_disk_together(jobs: list[CheckedJob], at_once: int) -> None:
    """Raise SweepRefused unless the unfinished jobs' files fit together on each disk they
    write to: each job's once it has finished (its last checkpoint and its snapshots) and,
    beside them, the other checkpoints of the `at_once` jobs that need most while they run.
    Each job was checked alone by `check_run`."""
    disks: dict[int, list[tuple[int, int, Path]]] = {}
    for job in jobs:
        if not job.done:
            running, finished, place = disk_needs(job.run, RunDirectory(job.run_dir).checkpoints)
            disks.setdefault(os.stat(place).st_dev, []).append((finished, running, place))
    for needs in disks.values():
        largest = sorted((running - finished for finished, running, _ in needs), reverse=True)
        needed = sum(finished for finished, _, _ in needs) + sum(largest[:at_once])
        free = shutil.disk_usage(needs[0][2]).free
        if needed > free:
            raise SweepRefused(
                f"the sweep's {len(needs)} unfinished jobs, {at_once} at a time, need "
                f"{size_text(needed)} more on the disk of {needs[0][2]} (each finished job keeps a "
                f"checkpoint and its snapshots) and it has {size_text(free)} free: lower "
                "checkpoint.keep or replay.capacity, run fewer jobs at a time "
                "(hydra.launcher.n_jobs), or give hydra.sweep.dir on a larger disk"
            )


def check_sweep(config: DictConfig, jobs: list[list[str]]) -> list[Path]:
    """Raise SweepRefused for the first of `jobs` (`sweep_jobs`) that would be refused, that
    is the same run as another (a value written two ways: breakout and Breakout) or would
    share its run directory with another, or for jobs whose files would not fit on the disk
    together; HydraException for one Hydra cannot compose. Returns
    the runs in the sweep directory that no job is named for (another sweep's, or this one's
    under other names: a key that starts or stops varying renames the jobs)."""
    labels = job_labels(dict(enumerate(jobs)))
    this_machine = config.hydra.runtime.choices.get("hydra/launcher") in LOCAL_LAUNCHERS
    loader = GlobalHydra.instance().config_loader()
    checked: list[CheckedJob] = []
    for number, overrides in enumerate(jobs):
        try:
            job = loader.load_sweep_config(config, overrides)
        except (HydraException, OmegaConfBaseException) as error:
            # Hydra's message on one line, without the config search path it appends.
            message = " ".join(str(error).split("\nConfig search path")[0].split())
            raise HydraException(f"{labels[number]}: {message}") from None
        with open_dict(job):
            job.hydra.job.num = number
        try:
            job = check_job(job, this_machine)
        except ValueError as error:
            raise SweepRefused(f"{labels[number]}: {error_line(error)}") from None
        for other, earlier in enumerate(checked):
            both = f"{labels[number]} and {labels[other]}"
            if job.record == earlier.record:
                mine = " ".join(o for o in overrides if o not in jobs[other])
                theirs = " ".join(o for o in jobs[other] if o not in overrides)
                same = (
                    f"{mine} is {theirs}" if mine else f"{repeated_values(config)} repeats a value"
                )
                raise SweepRefused(f"{both} are the same run ({same}): give each value once")
            if job.run_dir == earlier.run_dir:
                raise SweepRefused(
                    f"{both} would share the run directory {job.run_dir}: "
                    "hydra.job.config.override_dirname.exclude_keys leaves out a key the sweep "
                    "varies"
                )
        checked.append(job)
    if this_machine:
        check_disk_together(checked, jobs_at_once(config, len(jobs)))
    sweep_dir = Path(config.hydra.sweep.dir)
    found = sorted(path.parent for path in sweep_dir.glob(f"*/{CONFIG}"))
    named = {job.run_dir for job in checked}
    return [path for path in found if path not in named]


def sweep_command(sweep_dir: Path) -> str:
    """The command that started this sweep, with its sweep directory named (a `${now:}` one
    would be a new directory): run again, it resumes the sweep."""
    kept = [a for a in sys.argv[1:] if a.split("=", 1)[0].lstrip("+~") != "hydra.sweep.dir"]
    return shlex.join(["python", sys.argv[0], *kept, f"hydra.sweep.dir={sweep_dir}"])


class SweepChecks(Callback):
    """Checks every job of a sweep before the first one starts (see the module's docstring)."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        str(config.hydra.sweep.dir)  # its ${now:} is resolved once, for every job

        def stop(signum, frame) -> None:
            """Nothing is written yet: one line, and 0 after SIGTERM, 130 after SIGINT, as
            train.py."""
            print(
                f"sweep stopped by {signal.Signals(signum).name} while its jobs were checked, "
                "before any of them started; run it with: "
                f"{sweep_command(Path(config.hydra.sweep.dir))}",
                file=sys.stderr,
            )
            sys.exit(STOP_STATUS[signum])

        handlers = {signum: signal.signal(signum, stop) for signum in STOP_STATUS}
        try:
            jobs = sweep_jobs(config)
            if jobs is None:
                return  # the sweeper chooses its jobs as it goes: each checks itself
            name_jobs_by_varied_keys(config, jobs)
            unclaimed = check_sweep(config, jobs)
        except SweepRefused as error:
            # Hydra turns a callback's exception into a warning and goes on: exit instead.
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)
        except HydraException as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(1)
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
        if unclaimed:
            print(
                f"note: {config.hydra.sweep.dir} holds runs that no job of this sweep is named "
                f"for, left as they are: {', '.join(path.name for path in unclaimed)} (jobs are "
                "named by the keys the sweep varies)",
                file=sys.stderr,
            )
