"""The launcher of `hydra/launcher=local_parallel` and `shared_gpu`: hydra-joblib-launcher's, one
loky worker process per running job, made to stop as one train.py run stops.

SIGTERM or SIGINT to the sweep's process, or to one of its workers, stops the whole sweep:

- the sweep's process starts no further job and sends SIGTERM to every worker, so that each
  running job's loop finishes its step, writes its checkpoint and says so (SIGTERM whatever
  the signal: a terminal's Ctrl-C reaches the workers too, and a second SIGINT would stop them
  without a checkpoint); a job that has not reached its loop yet ends there, untrained;
- the sweep's process prints one line with the command that resumes the sweep and exits: 0
  after SIGTERM (as train.py does: a scheduler's stop, honoured, counts as done), 130 after
  SIGINT, 1 if a job failed. loky ends the workers as it exits; each run has ended its
  evaluation worker.

Running that command again resumes every unfinished job from its checkpoint; a finished one
says so and changes nothing. A second SIGINT to the sweep's process stops at once: joblib kills
the workers, and each of their jobs resumes from its last periodic checkpoint. A job that
fails does not stop the others: the sweep names it and exits 1 after the last job.
"""

import contextlib
import logging
import multiprocessing
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra_plugins.hydra_joblib_launcher._core import execute_job, process_joblib_cfg
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
from joblib import Parallel, delayed, parallel_config

from launch.sweep_checks import job_label

log = logging.getLogger(__name__)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Settings this launcher fixes: loky, one job per task, and no job sent to a worker before one
# is free, so that after a stop the jobs not started are simply never sent (and the quick jobs
# of finished runs are not batched into one worker by joblib's "auto").
FIXED_SETTINGS = ("backend", "prefer", "require", "pre_dispatch", "batch_size")

FINISHED, STOPPED, NOT_STARTED, FAILED = "finished", "stopped", "not started", "failed"


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended, as the process that ran it saw it."""

    number: int
    state: str  # FINISHED, STOPPED, NOT_STARTED or FAILED
    stop_signal: int | None = None  # the signal that stopped it (STOPPED, NOT_STARTED)
    job_return: JobReturn | None = None  # Hydra's, when the job ran to its end
    failure: str = ""  # FAILED: why


class StoppedBeforeItsLoop(BaseException):
    """A stop request reached a job before train.py's loop took the signals over. Not an
    Exception: Hydra's run_job would record that as the job's failure."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signal = signum


class WorkerStop:
    """A process that runs jobs (a loky worker; the sweep's own with n_jobs=1): once asked to
    stop, between jobs or by a job's end, it starts no further job. A worker whose sweep's
    process is gone (killed by SIGKILL) ends on the stop request, or after its job."""

    def __init__(self):
        self.signal: int | None = None
        self.sweep_process: int | None = None  # in a worker: the process that started it

    def install(self) -> None:
        """A worker records a stop from its start on, instead of dying of it (a dead worker
        breaks the executor, and joblib then kills the others)."""
        self.sweep_process = os.getppid()
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.record)

    def record(self, signum, frame) -> None:
        self.signal = signum
        self.end_if_orphaned()

    def end_if_orphaned(self) -> None:
        """No job will come and no one reads a result: end the worker (it holds nothing
        unsaved between jobs)."""
        if self.sweep_process is not None and os.getppid() != self.sweep_process:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    @staticmethod
    def interrupt(signum, frame) -> None:
        raise StoppedBeforeItsLoop(signum)


worker_stop = WorkerStop()


def start_worker() -> None:
    """loky's initializer: a function, pickled by name (a bound method would carry a copy)."""
    worker_stop.install()


def run_job(number: int, overrides: Sequence[str], *context) -> JobOutcome:
    """One job, as hydra-joblib-launcher runs it (`context`: its execute_job's other
    arguments), and how it ended. Until train.py installs its StopRequest, a stop request ends
    the job where it is; the loop's StopRequest then checkpoints; the handlers of before come
    back after the job."""
    if worker_stop.signal is not None:
        return JobOutcome(number, NOT_STARTED, stop_signal=worker_stop.signal)
    handlers = {signum: signal.signal(signum, WorkerStop.interrupt) for signum in STOP_SIGNALS}
    try:
        job_return = execute_job(number, overrides, *context)
        outcome = _returned(number, job_return)
    except StoppedBeforeItsLoop as stop:
        outcome = JobOutcome(number, NOT_STARTED, stop_signal=stop.signal)
    except SystemExit as end:
        outcome = _exited(number, end.code)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    if outcome.stop_signal is not None:
        worker_stop.signal = outcome.stop_signal
    worker_stop.end_if_orphaned()
    return outcome


def _returned(number: int, job_return: JobReturn) -> JobOutcome:
    if job_return.status == JobStatus.COMPLETED:
        return JobOutcome(number, FINISHED, job_return=job_return)
    error = job_return._return_value  # the exception; `return_value` would raise it
    return JobOutcome(number, FAILED, failure=f"{type(error).__name__}: {error}")


def _exited(number: int, code) -> JobOutcome:
    """train.py exits 0 once a SIGTERM's stop is checkpointed and 130 after a SIGINT's
    (`report_stop`); any other exit is the run's own end (refused, failed), said on its
    stderr."""
    status = 0 if code is None else code if isinstance(code, int) else 1
    if status == 0:
        return JobOutcome(number, STOPPED, stop_signal=signal.SIGTERM)
    if status == 130:
        return JobOutcome(number, STOPPED, stop_signal=signal.SIGINT)
    return JobOutcome(number, FAILED, failure=f"exit status {status}")


class SweepStop:
    """The sweep's process: the first stop request, from a signal or from a job that was
    stopped, passed on to every worker as SIGTERM. A second SIGINT stops at once: it raises
    KeyboardInterrupt, on which joblib kills the workers."""

    def __init__(self):
        self.signal: int | None = None

    def request(self, signum: int) -> None:
        if self.signal is not None:
            return
        self.signal = signum
        for worker in multiprocessing.active_children():  # loky's workers
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGTERM)

    def _handle(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.signal == signal.SIGINT:
            raise KeyboardInterrupt
        self.request(signum)

    @contextlib.contextmanager
    def installed(self):
        handlers = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        try:
            yield self
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)


def sweep_command(sweep_dir: Path) -> str:
    """The command that started this sweep, with its sweep directory named (a `${now:}` one
    would be a new directory): run again, it resumes the sweep."""
    kept = [a for a in sys.argv[1:] if a.split("=", 1)[0].lstrip("+~") != "hydra.sweep.dir"]
    return shlex.join(["python", sys.argv[0], *kept, f"hydra.sweep.dir={sweep_dir}"])


def parallel_arguments(settings: dict) -> dict:
    """joblib.Parallel's arguments from the launcher's settings (`hydra.launcher`)."""
    arguments = {key: value for key, value in settings.items() if key not in FIXED_SETTINGS}
    process_joblib_cfg(arguments)
    return {**arguments, "pre_dispatch": "n_jobs", "batch_size": 1}


class StoppableJoblibLauncher(JoblibLauncher):
    """Built by hydra_plugins/per_atari/local_parallel_launcher.py in the sweep's process."""

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        arguments = parallel_arguments(self.joblib)
        shown = ",".join(f"{key}={value}" for key, value in arguments.items())
        log.info(f"Joblib.Parallel({shown}) is launching {len(job_overrides)} jobs")
        log.info(f"Launching jobs, sweep output dir : {sweep_dir}")
        jobs = dict(enumerate(job_overrides, start=initial_job_idx))
        for number, overrides in jobs.items():
            log.info(f"\t#{number} : {' '.join(filter_overrides(overrides))}")
        stop = SweepStop()
        outcomes = self._run(jobs, arguments, stop, sweep_dir)
        return conclude(jobs, outcomes, stop.signal, sweep_dir)

    def _run(self, jobs: dict, arguments: dict, stop: SweepStop, sweep_dir: Path) -> dict:
        """Every job's outcome by its number; a job never sent (after a stop) has none."""
        context = (self.hydra_context, self.config, self.task_function, Singleton.get_state())
        calls = (  # read as joblib sends each job, so none is sent after a stop
            delayed(run_job)(number, overrides, *context)
            for number, overrides in jobs.items()
            if stop.signal is None
        )
        outcomes = {}
        with stop.installed(), parallel_config(backend="loky", initializer=start_worker):
            try:
                parallel = Parallel(**arguments, return_as="generator_unordered")
                with contextlib.closing(parallel(calls)) as ended:
                    for outcome in ended:
                        outcomes[outcome.number] = outcome
                        if outcome.stop_signal is not None:
                            stop.request(outcome.stop_signal)
            except KeyboardInterrupt:
                print(
                    "sweep stopped at once by a second SIGINT: its running jobs were killed; "
                    f"they resume from their last checkpoints with: {sweep_command(sweep_dir)}",
                    file=sys.stderr,
                )
                sys.exit(130)
        return outcomes


def conclude(
    jobs: dict, outcomes: dict[int, JobOutcome], stop_signal: int | None, sweep_dir: Path
) -> list[JobReturn]:
    """Hydra's returns when every job finished. Otherwise a line for each failed job, one
    line with the command that resumes the sweep, and the sweep's exit."""
    states = {n: outcomes[n].state if n in outcomes else NOT_STARTED for n in jobs}
    if stop_signal is None and set(states.values()) == {FINISHED}:
        return [outcomes[number].job_return for number in jobs]
    shared = set.intersection(*(set(overrides) for overrides in jobs.values()))
    for number, state in states.items():
        if state == FAILED:
            label = job_label(number, list(jobs[number]), shared)
            print(f"error: {label} failed: {outcomes[number].failure}", file=sys.stderr)
    counts = [
        f"{sum(s == state for s in states.values())} {state}"
        for state in (STOPPED, NOT_STARTED, FAILED, FINISHED)
        if state in states.values()
    ]
    how = "ended" if stop_signal is None else f"stopped by {signal.Signals(stop_signal).name}"
    print(
        f"sweep {how} (jobs: {', '.join(counts)}); resume with: {sweep_command(sweep_dir)}",
        file=sys.stderr,
    )
    if FAILED in states.values():
        sys.exit(1)
    sys.exit(130 if stop_signal == signal.SIGINT else 0)
