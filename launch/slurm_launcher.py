"""The launcher of `hydra/launcher=slurm`: hydra-submitit-launcher's SLURM launcher, with two
changes a training sweep needs (docs/sweeps.md, "A cluster: SLURM through submitit"): submitit's
preemption signal first stops the run as SIGTERM does, with a checkpoint, before submitit
requeues the job; and a job that ends without a result ends the sweep only once every other
job has, each such job named on one line."""

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

from launch.sweep_checks import job_labels
from training.loop import StopRequest

log = logging.getLogger(__name__)
# How often the sweep looks for finished jobs (submitit asks SLURM less often, as they age).
POLL_SECONDS = 1.0
# The checkout the sweep runs from: the project is not installed (pyproject.toml), and a job
# unpickles this launcher and train.py's task before any of its code runs, wherever SLURM
# starts it.
CHECKOUT = Path(__file__).resolve().parents[1]


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
    """Started by hydra_plugins/per_atari/launchers.py in the sweep's process, and
    pickled into every SLURM job (a job imports this module from the sweep's checkout, which
    its script puts on PYTHONPATH: `_executor`)."""

    def __call__(self, *arguments, **keywords) -> JobReturn:
        """Runs in the SLURM job. submitit's handler of its preemption signal requeues the job
        and exits at once; it is called only once the run has checkpointed and stopped."""
        preemption = getattr(signal, f"SIG{submitit.JobEnvironment.USR_SIG}")
        requeue = signal.getsignal(preemption)  # submitit's: resubmit, scontrol requeue, exit
        received = []

        def checkpoint_then_requeue(signum, frame):
            # The run's own SIGTERM handler is installed once train.py's loop has started.
            handler = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
            if isinstance(handler, StopRequest):
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
        jobs = {n: list(overrides) for n, overrides in enumerate(job_overrides, initial_job_idx)}
        for number, overrides in jobs.items():
            log.info(f"\t#{number} : {' '.join(filter_overrides(overrides))}")
        state = Singleton.get_state()
        calls = [(o, "hydra.sweep.dir", n, f"job_id_for_{n}", state) for n, o in jobs.items()]
        submitted = executor.map_array(self, *zip(*calls, strict=True))
        labels = list(job_labels(jobs).values())
        returns, failures = self._wait(submitted, labels, 60 * self.params["timeout_min"])
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
        # The job script's lines before the job starts: the checkout on PYTHONPATH, then the
        # user's (`hydra.launcher.setup`, such as activating an environment).
        checkout = shlex.quote(str(CHECKOUT))
        path = f"export PYTHONPATH={checkout}${{PYTHONPATH:+:$PYTHONPATH}}"
        params["setup"] = [path, *(params.get("setup") or [])]
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
        returns: dict[int, JobReturn | None] = {}
        failures: dict[int, str] = {}
        unknown_since: dict[int, float] = {}
        pending = set(range(len(jobs)))
        while pending:
            for index in sorted(pending):
                job, failure = jobs[index], None
                if job.done():
                    pending.discard(index)
                    returns[index], failure = _outcome(job)
                elif job.state != "UNKNOWN":
                    unknown_since.pop(index, None)
                elif time.monotonic() - unknown_since.setdefault(index, time.monotonic()) >= (
                    unknown_limit_s
                ):
                    pending.discard(index)
                    failure = (
                        f": its state has been UNKNOWN for {unknown_limit_s / 60:g} min, its time "
                        "limit (sacct does not know it): no longer waited for"
                    )
                if failure is not None:
                    failures[index] = (
                        f"error: {labels[index]}, SLURM job {job.job_id}{failure}; its log: "
                        f"{job.paths.stderr}"
                    )
                    if pending:
                        log.warning(f"{failures[index]}; waiting for the other jobs")
            if pending:
                time.sleep(POLL_SECONDS)
        ended = [returns[i] for i in sorted(returns) if returns[i] is not None]
        return ended, [failures[i] for i in sorted(failures)]


def _outcome(job) -> tuple[JobReturn | None, str | None]:
    """A finished job's return (None: it left none) and, if it failed, how its line says so."""
    try:
        job_return = job.results()[0]
    except UncompletedJobError:
        reason = _last_word_of_the_run(job.paths.stderr) or "no result"
        return None, f", ended {job.state}: {reason}"
    if job_return.status != JobStatus.FAILED:
        return job_return, None
    error = job_return._return_value
    return job_return, f", failed: {type(error).__name__}: {error}"
