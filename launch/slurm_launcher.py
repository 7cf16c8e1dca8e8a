"""The launcher of `hydra/launcher=slurm`: hydra-submitit-launcher's SLURM launcher, with two
changes a training sweep needs.

- Preemption and time limits: submitit's signal (USR2, `signal_delay_s` before the time limit,
  or sent to preempt) first stops the run the way SIGTERM does (finish the step, write a
  checkpoint), then submitit requeues the job, which resumes the run from that checkpoint in
  the same run directory.
- A job that ends without a result (cancelled, killed, failed) does not end the sweep while
  other jobs still run: the sweep waits for every job, names each failed one on one line
  (its number, its overrides, its SLURM id, its state and its log) and exits with status 1.
  A job SLURM's accounting stops knowing (its state UNKNOWN) is given up after its time
  limit, so the sweep ends in bounded time however the job ended.
"""

import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import submitit
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher import submitit_launcher
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import OmegaConf
from submitit.core.utils import UncompletedJobError

from launch.sweep_checks import job_label
from training.loop import StopRequest

log = logging.getLogger(__name__)
# How often the sweep looks for finished jobs (submitit asks SLURM less often, as they age).
POLL_SECONDS = 1.0
# The checkout the sweep runs from: the project is not installed (pyproject.toml), and a job
# unpickles this launcher and train.py's task before any of its code runs, wherever SLURM
# starts it.
CHECKOUT = Path(__file__).resolve().parents[1]


def _run_stops_on_sigterm() -> bool:
    """Whether the run's own SIGTERM handler is installed: train.py's loop has started."""
    return isinstance(getattr(signal.getsignal(signal.SIGTERM), "__self__", None), StopRequest)


def _last_word_of_the_run(log_path: Path) -> str:
    """train.py's last one-line report in the job's log (`error: ...`, or `stopped by ...`
    with the command that resumes it), or ''."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    reports = (line for line in reversed(lines) if line.startswith(("error: ", "stopped by ")))
    return next(reports, "").removeprefix("error: ")


class PreemptibleSlurmLauncher(submitit_launcher.SlurmLauncher):
    """Started by hydra_plugins/per_atari/slurm_launcher.py in the sweep's process, and
    pickled into every SLURM job (a job imports this module from the sweep's checkout, which
    its script puts on PYTHONPATH: `job_setup`)."""

    def __call__(self, *arguments, **keywords) -> JobReturn:
        """Runs in the SLURM job. submitit's handler of its preemption signal requeues the job
        and exits at once; it is called only once the run has checkpointed and stopped."""
        preemption = getattr(signal, f"SIG{submitit.JobEnvironment.USR_SIG}")
        requeue = signal.getsignal(preemption)  # submitit's: resubmit, scontrol requeue, exit
        received = []

        def checkpoint_then_requeue(signum, frame):
            if _run_stops_on_sigterm():
                received.append(signum)
                os.kill(os.getpid(), signal.SIGTERM)
            else:  # the run has not started: nothing to save
                requeue(signum, frame)

        signal.signal(preemption, checkpoint_then_requeue)
        try:
            return super().__call__(*arguments, **keywords)
        except SystemExit as stop:
            # train.py exits 0 once a stop request is checkpointed; any other exit is the
            # run's own end (refused, failed) and is reported by the sweep.
            if received and stop.code == 0:
                requeue(received[0], None)
            raise

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        """Submit one array job, one task per job, and wait for all of them."""
        executor = self._executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        log.info(f"Submitit 'slurm' sweep output dir : {sweep_dir}")
        numbers = range(initial_job_idx, initial_job_idx + len(job_overrides))
        for number, overrides in zip(numbers, job_overrides, strict=True):
            log.info(f"\t#{number} : {' '.join(filter_overrides(overrides))}")
        state = Singleton.get_state()
        jobs = executor.map_array(
            self,
            [list(overrides) for overrides in job_overrides],
            ["hydra.sweep.dir"] * len(job_overrides),
            list(numbers),
            [f"job_id_for_{number}" for number in numbers],
            [state] * len(job_overrides),
        )
        shared = set.intersection(*(set(overrides) for overrides in job_overrides))
        labels = [
            job_label(number, list(overrides), shared)
            for number, overrides in zip(numbers, job_overrides, strict=True)
        ]
        returns, failures = self._wait(jobs, labels, 60 * self.params["timeout_min"])
        if failures:
            print("\n".join(failures), file=sys.stderr)
            sys.exit(1)
        return returns

    def _executor(self) -> submitit.AutoExecutor:
        """submitit's executor with this launcher's parameters, as the plugin builds it."""
        params = dict(self.params)
        executor = submitit.AutoExecutor(
            cluster="slurm",
            folder=params.pop("submitit_folder"),
            slurm_max_num_timeout=params.pop("max_num_timeout"),
        )
        shared_keys = set(OmegaConf.structured(BaseQueueConf).keys())
        params["setup"] = job_setup(params.get("setup"))
        executor.update_parameters(
            **{key if key in shared_keys else f"slurm_{key}": v for key, v in params.items()}
        )
        return executor

    @staticmethod
    def _wait(
        jobs: list, labels: list[str], unknown_limit_s: float
    ) -> tuple[list[JobReturn], list[str]]:
        """Every job's return, in order, and a line for each job that ended without one,
        written as soon as the job is seen to end. A job whose state has stayed UNKNOWN for
        `unknown_limit_s` (its time limit) counts as one: SLURM's accounting knows a job from
        its submission, so one it does not know has ended unseen (or cannot be followed), and
        without this the sweep would wait for it forever."""
        returns: dict[int, JobReturn] = {}
        failures: dict[int, str] = {}
        unknown_since: dict[int, float] = {}
        pending = set(range(len(jobs)))
        while pending:
            for index in sorted(pending):
                job, label = jobs[index], labels[index]
                if job.done():
                    pending.discard(index)
                    job_return, failure = _outcome(job, label)
                    if job_return is not None:
                        returns[index] = job_return
                    if failure is not None:
                        failures[index] = failure
                elif job.state != "UNKNOWN":
                    unknown_since.pop(index, None)
                elif time.monotonic() - unknown_since.setdefault(index, time.monotonic()) >= (
                    unknown_limit_s
                ):
                    pending.discard(index)
                    failures[index] = (
                        f"error: {label}, SLURM job {job.job_id}: its state has been UNKNOWN for "
                        f"{unknown_limit_s / 60:g} min, its time limit (sacct does not know it): "
                        f"no longer waited for; its log: {job.paths.stderr}"
                    )
                if index in failures and pending:
                    log.warning(f"{failures[index]}; waiting for the other jobs")
            if pending:
                time.sleep(POLL_SECONDS)
        return [returns[i] for i in sorted(returns)], [failures[i] for i in sorted(failures)]


def job_setup(setup: Sequence[str] | None) -> list[str]:
    """The job script's lines before the job starts: the checkout on PYTHONPATH, then the
    user's (`hydra.launcher.setup`, such as activating an environment)."""
    checkout = shlex.quote(str(CHECKOUT))
    return [f"export PYTHONPATH={checkout}${{PYTHONPATH:+:$PYTHONPATH}}", *(setup or [])]


def _outcome(job, label: str) -> tuple[JobReturn | None, str | None]:
    """A finished job's return (None: it left none) and its line if it failed (else None)."""
    try:
        job_return = job.results()[0]
    except UncompletedJobError:
        reason = _last_word_of_the_run(job.paths.stderr) or "no result"
        return None, (
            f"error: {label}, SLURM job {job.job_id}, ended {job.state}: {reason}; its log: "
            f"{job.paths.stderr}"
        )
    if job_return.status != JobStatus.FAILED:
        return job_return, None
    error = job_return._return_value
    return job_return, (
        f"error: {label}, SLURM job {job.job_id}, failed: {type(error).__name__}: {error}; its "
        f"log: {job.paths.stderr}"
    )
