"""The launcher of `hydra/launcher=local_parallel` and `shared_gpu`: hydra-joblib-launcher's
jobs, `n_jobs` at a time (joblib's threads), each in a worker process of its own (loky's),
made to stop as one train.py run stops. A SIGTERM or SIGINT to the sweep's process (from the
end of the sweep's checks on) or to one of its workers, or a worker that dies, stops every
running job with its checkpoint and starts no further one; the sweep ends once every worker
has, in one line with the command that resumes it (docs/sweeps.md, "Stopping and resuming a
local sweep"). A job that fails does not stop the others.
"""

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.types import HydraContext, TaskFunction
from hydra_plugins.hydra_joblib_launcher._core import execute_job, process_joblib_cfg
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
from joblib import Parallel, cpu_count, delayed, effective_n_jobs, parallel_config
from joblib.externals.loky import BrokenProcessPool, ProcessPoolExecutor
from omegaconf import DictConfig

from launch.sweep_checks import STOP_STATUS, job_labels, sweep_command

log = logging.getLogger(__name__)
# Settings this launcher fixes: threads that each wait for one job's worker, one job per task,
# and no job sent to a thread before one is free, so that after a stop the jobs not started
# are simply never sent.
FIXED_SETTINGS = ("backend", "prefer", "require", "pre_dispatch", "batch_size")

FINISHED, STOPPED, NOT_STARTED, FAILED = "finished", "stopped", "not started", "failed"
DIED = "died"  # its worker process ended without a result: killed (out of memory), crashed


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended, as the process that ran it saw it."""

    number: int
    state: str  # FINISHED, STOPPED, NOT_STARTED, FAILED or DIED
    stop_signal: int | None = None  # the signal that stopped it (STOPPED, NOT_STARTED)
    job_return: JobReturn | None = None  # Hydra's, when the job ran to its end
    failure: str = ""  # FAILED, DIED: why


class StoppedBeforeItsLoop(BaseException):
    """A stop request reached a job before train.py's loop took the signals over. Not an
    Exception: Hydra's run_job would record that as the job's failure."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signal = signum


class WorkerStop:
    """A job's worker process: asked to stop before its job starts, it does not start it. A
    worker whose sweep's process is gone (killed by SIGKILL) ends on the stop request, or
    after its job."""

    def __init__(self):
        self.signal: int | None = None
        self.sweep_process: int | None = None  # in a worker: the process that started it

    def record(self, signum, frame) -> None:
        self.signal = signum
        self.end_if_orphaned()

    def end_if_orphaned(self) -> None:
        """No one reads a result: end the worker (it holds nothing unsaved outside its
        job's loop)."""
        if self.sweep_process is not None and os.getppid() != self.sweep_process:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    @staticmethod
    def interrupt(signum, frame) -> None:
        raise StoppedBeforeItsLoop(signum)


worker_stop = WorkerStop()


def start_worker() -> None:
    """loky's initializer (a function, pickled by name: a bound method would carry a copy): a
    worker records a stop from its start on, instead of dying of it."""
    worker_stop.sweep_process = os.getppid()
    for signum in STOP_STATUS:
        signal.signal(signum, worker_stop.record)


def run_job(number: int, overrides: Sequence[str], *context) -> JobOutcome:
    """One job, as hydra-joblib-launcher runs it (`context`: its execute_job's other
    arguments), and how it ended. Until train.py installs its StopRequest, a stop request ends
    the job where it is; the loop's StopRequest then checkpoints; the handlers of before come
    back after the job."""
    if worker_stop.signal is not None:
        return JobOutcome(number, NOT_STARTED, stop_signal=worker_stop.signal)
    handlers = {signum: signal.signal(signum, WorkerStop.interrupt) for signum in STOP_STATUS}
    try:
        job_return = execute_job(number, overrides, *context)
        outcome = JobOutcome(number, FINISHED, job_return=job_return)
        if job_return.status != JobStatus.COMPLETED:
            error = job_return._return_value  # the exception; `return_value` would raise it
            outcome = JobOutcome(number, FAILED, failure=f"{type(error).__name__}: {error}")
    except StoppedBeforeItsLoop as stop:
        outcome = JobOutcome(number, NOT_STARTED, stop_signal=stop.signal)
    except SystemExit as end:
        # train.py exits with its stop's status (`STOP_STATUS`) once the stop is checkpointed;
        # any other exit is the run's own end (refused, failed), said on its stderr.
        status = 0 if end.code is None else end.code if isinstance(end.code, int) else 1
        stopped_by = {exit_status: signum for signum, exit_status in STOP_STATUS.items()}
        outcome = JobOutcome(number, FAILED, failure=f"exit status {status}")
        if status in stopped_by:
            outcome = JobOutcome(number, STOPPED, stop_signal=stopped_by[status])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    worker_stop.end_if_orphaned()
    return outcome


# Workers are started one at a time, so that each thread knows its own.
_starting = threading.Lock()


def run_alone(
    number: int, overrides: Sequence[str], context: tuple, env: dict, stop: "SweepStop"
) -> JobOutcome:
    """`run_job` in a worker process of its own (`env`: its environment variables), and how
    it ended; a job stopped, or whose worker died, stops the sweep before joblib sends the
    next. A worker that dies takes only its own job with it: one of a shared pool breaks the
    pool, and loky then kills every other worker, their jobs unsaved."""
    executor = ProcessPoolExecutor(max_workers=1, initializer=start_worker, env=env)
    with _starting:
        before = set(multiprocessing.active_children())
        job = executor.submit(run_job, number, overrides, *context)
        (worker,) = set(multiprocessing.active_children()) - before
    if stop.signal is not None:  # the stop came while it started: it may not have been told
        os.kill(worker.pid, signal.SIGTERM)
    try:
        outcome = job.result()
    except BrokenProcessPool:
        worker.join()
        code = worker.exitcode
        if -code in STOP_STATUS:  # a stop before its handlers (`start_worker`): no job began
            outcome = JobOutcome(number, NOT_STARTED, stop_signal=-code)
        else:
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            outcome = JobOutcome(number, DIED, failure=how)
    finally:
        executor.shutdown()
    if outcome.stop_signal is not None or outcome.state == DIED:
        stop.request(outcome.stop_signal or signal.SIGTERM)
    return outcome


def _signal_workers(signum: int) -> None:
    for worker in multiprocessing.active_children():  # loky's workers
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signum)


class SweepStop:
    """The sweep's process: the first stop request, from a signal or from a job that was
    stopped or whose worker died, passed on to every worker as SIGTERM whatever the signal (a
    terminal's Ctrl-C reaches the workers too, and a second SIGINT would stop them without a
    checkpoint). A second SIGINT to the sweep's process stops at once: the workers are
    killed."""

    def __init__(self, sweep_dir: Path):
        self.signal: int | None = None
        self.sweep_dir = sweep_dir

    def request(self, signum: int) -> None:
        """The stop is recorded before the workers are told: a worker started meanwhile is
        told by its own thread (`run_alone`)."""
        if self.signal is not None:
            return
        self.signal = signum
        _signal_workers(signal.SIGTERM)

    def handle(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.signal == signal.SIGINT:
            _signal_workers(signal.SIGKILL)
            print(
                "sweep stopped at once by a second SIGINT: its running jobs were killed; "
                f"they resume from their last checkpoints with: {sweep_command(self.sweep_dir)}",
                file=sys.stderr,
            )
            sys.exit(STOP_STATUS[signal.SIGINT])
        self.request(signum)


def worker_environment(n_jobs: int) -> dict:
    """Each worker's OMP_NUM_THREADS, where the sweep's process has none: the cores shared
    among the jobs that run at once (`threads: auto` takes it as the run's torch threads)."""
    if "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, cpu_count() // effective_n_jobs(n_jobs)))}


class StoppableJoblibLauncher(JoblibLauncher):
    """Built by hydra_plugins/per_atari/launchers.py in the sweep's process."""

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        """Right after the sweep's checks, before its sweeper writes anything: from here on a
        stop is the sweep's (`SweepStop`), which its `launch` reads."""
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.stop = SweepStop(Path(str(config.hydra.sweep.dir)))
        for signum in STOP_STATUS:  # for the rest of the sweep's process
            signal.signal(signum, self.stop.handle)

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = self.stop.sweep_dir
        sweep_dir.mkdir(parents=True, exist_ok=True)
        arguments = {key: v for key, v in self.joblib.items() if key not in FIXED_SETTINGS}
        process_joblib_cfg(arguments)
        arguments.update(pre_dispatch="n_jobs", batch_size=1)
        shown = ",".join(f"{key}={value}" for key, value in arguments.items())
        log.info(f"Joblib.Parallel({shown}) is launching {len(job_overrides)} jobs")
        log.info(f"Launching jobs, sweep output dir : {sweep_dir}")
        jobs = dict(enumerate(job_overrides, start=initial_job_idx))
        for number, overrides in jobs.items():
            log.info(f"\t#{number} : {' '.join(filter_overrides(overrides))}")
        context = (self.hydra_context, self.config, self.task_function, Singleton.get_state())
        env = worker_environment(arguments["n_jobs"])
        calls = (  # read as joblib sends each job, so none is sent after a stop
            delayed(run_alone)(number, overrides, context, env, self.stop)
            for number, overrides in jobs.items()
            if self.stop.signal is None
        )
        outcomes = {}  # a job never sent (after a stop) has none
        with parallel_config(backend="threading"):
            parallel = Parallel(**arguments, return_as="generator_unordered")
            with contextlib.closing(parallel(calls)) as ended:
                for outcome in ended:
                    outcomes[outcome.number] = outcome
        return conclude(jobs, outcomes, self.stop.signal, sweep_dir)


def conclude(
    jobs: dict, outcomes: dict[int, JobOutcome], stop_signal: int | None, sweep_dir: Path
) -> list[JobReturn]:
    """Hydra's returns when every job finished. Otherwise a line for each failed job, one
    line with what stopped the sweep (a signal, or the first job whose worker died) and the
    command that resumes it, and the sweep's exit."""
    states = {n: outcomes[n].state if n in outcomes else NOT_STARTED for n in jobs}
    if stop_signal is None and set(states.values()) == {FINISHED}:
        return [outcomes[number].job_return for number in jobs]
    labels = job_labels(jobs)
    for number, state in states.items():
        if state == FAILED:
            print(f"error: {labels[number]} failed: {outcomes[number].failure}", file=sys.stderr)
    counts = [
        f"{sum(s == state for s in states.values())} {state}"
        for state in (STOPPED, NOT_STARTED, FAILED, DIED, FINISHED)
        if state in states.values()
    ]
    how = "ended" if stop_signal is None else f"stopped by {signal.Signals(stop_signal).name}"
    died = [number for number, state in states.items() if state == DIED]
    if died:
        how = f"stopped: the worker of {labels[died[0]]} died ({outcomes[died[0]].failure})"
    print(
        f"sweep {how} (jobs: {', '.join(counts)}); resume with: {sweep_command(sweep_dir)}",
        file=sys.stderr,
    )
    if FAILED in states.values() or died:
        sys.exit(1)
    sys.exit(STOP_STATUS.get(stop_signal, 0))
