"""How a local parallel sweep's job ends in the process that runs it, and what the sweep says
and returns at its end, on hand-built cases (real processes: tests/test_local_sweep_stop.py)."""

import os
import signal
import sys

import pytest
from hydra.core.utils import JobReturn, JobStatus

# The local-sweep extra (`joblib`): without it these tests skip, and the rest still collects.
pytest.importorskip("hydra_plugins.hydra_joblib_launcher")

from launch import joblib_launcher  # noqa: E402
from launch.joblib_launcher import (  # noqa: E402
    DIED,
    FAILED,
    FINISHED,
    NOT_STARTED,
    STOPPED,
    JobOutcome,
    conclude,
    run_job,
    sweep_command,
    worker_environment,
)

JOBS = {0: ["seed=0", "threads=1"], 1: ["seed=1", "threads=1"], 2: ["seed=2", "threads=1"]}
COMMAND = ["train.py", "-m", "seed=0,1,2", "threads=1"]
RESUME = "resume with: python train.py -m seed=0,1,2 threads=1 hydra.sweep.dir=multirun/s"


@pytest.fixture(autouse=True)
def sweep_started_by(monkeypatch):
    monkeypatch.setattr(sys, "argv", COMMAND)
    monkeypatch.setattr(joblib_launcher.worker_stop, "signal", None)


def finished(number: int) -> JobOutcome:
    job_return = JobReturn(status=JobStatus.COMPLETED, _return_value=None)
    return JobOutcome(number, FINISHED, job_return=job_return)


def ending(jobs, outcomes, stop_signal, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as end:
        conclude(jobs, outcomes, stop_signal, "multirun/s")
    return end.value.code, capsys.readouterr().err


def test_a_sweep_whose_jobs_all_finished_returns_hydras_returns_in_job_order(capsys):
    outcomes = {number: finished(number) for number in (2, 0, 1)}
    returns = conclude(JOBS, outcomes, None, "multirun/s")
    assert returns == [outcomes[0].job_return, outcomes[1].job_return, outcomes[2].job_return]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("stop_signal", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_stopped_sweep_says_how_its_jobs_ended_and_exits_as_train_py(stop_signal, status, capsys):
    outcomes = {0: JobOutcome(0, STOPPED, stop_signal), 1: finished(1)}  # job 2 never sent
    name = signal.Signals(stop_signal).name
    assert ending(JOBS, outcomes, stop_signal, capsys) == (
        status,
        f"sweep stopped by {name} (jobs: 1 stopped, 1 not started, 1 finished); {RESUME}\n",
    )


def test_a_failed_job_is_named_and_the_sweep_exits_1_after_a_stop_too(capsys):
    outcomes = {
        0: JobOutcome(0, FAILED, failure="exit status 2"),
        1: JobOutcome(1, FAILED, failure="RuntimeError: boom"),
        2: JobOutcome(2, STOPPED, signal.SIGTERM),
    }
    assert ending(JOBS, outcomes, signal.SIGTERM, capsys) == (
        1,
        "error: job 0 (seed=0) failed: exit status 2\n"
        "error: job 1 (seed=1) failed: RuntimeError: boom\n"
        f"sweep stopped by SIGTERM (jobs: 1 stopped, 2 failed); {RESUME}\n",
    )


def test_a_worker_that_died_stops_the_sweep_named_in_its_one_line_and_exits_1(capsys):
    outcomes = {
        0: JobOutcome(0, STOPPED, signal.SIGTERM),
        1: JobOutcome(1, DIED, failure="killed by SIGKILL"),
    }  # job 2 never sent
    assert ending(JOBS, outcomes, signal.SIGTERM, capsys) == (
        1,
        "sweep stopped: the worker of job 1 (seed=1) died (killed by SIGKILL) (jobs: 1 stopped, "
        f"1 not started, 1 died); {RESUME}\n",
    )


def test_each_worker_gets_its_share_of_the_cores_unless_omp_num_threads_is_set(monkeypatch):
    """What each run's `threads: auto` then takes as its torch threads (n_jobs=-1: a job on
    every core)."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    share = max(1, joblib_launcher.cpu_count() // 2)
    assert worker_environment(2) == {"OMP_NUM_THREADS": str(share)}
    assert worker_environment(-1) == {"OMP_NUM_THREADS": "1"}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert worker_environment(2) == {}  # the workers inherit the user's


def test_the_resume_command_names_the_sweep_directory_once_and_quotes(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py", "-m", "hydra.sweep.dir=a", "x=[1,2]", "y=a b"])
    assert sweep_command("runs/my sweep") == (
        "python train.py -m 'x=[1,2]' 'y=a b' 'hydra.sweep.dir=runs/my sweep'"
    )


def run(execute_job, monkeypatch) -> JobOutcome:
    monkeypatch.setattr(joblib_launcher, "execute_job", execute_job)
    return run_job(7, ["seed=7"], "context")


def test_a_job_stopped_by_its_loop_is_stopped_and_one_asked_first_never_starts(monkeypatch):
    def checkpointed_after_sigint(number, overrides, context):
        sys.exit(130)  # train.py's report_stop

    assert run(checkpointed_after_sigint, monkeypatch) == JobOutcome(7, STOPPED, signal.SIGINT)
    # A stop sent while its worker started, held until its handlers were in place.
    monkeypatch.setattr(joblib_launcher.worker_stop, "signal", signal.SIGTERM)
    never = run(lambda *job: pytest.fail("a job started after a stop"), monkeypatch)
    assert never == JobOutcome(7, NOT_STARTED, signal.SIGTERM)


def test_a_stop_before_the_loop_ends_the_job_there_and_the_handlers_come_back(monkeypatch):
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    reached = []

    def stopped_while_starting(number, overrides, context):
        os.kill(os.getpid(), signal.SIGTERM)
        reached.append("after the signal")

    assert run(stopped_while_starting, monkeypatch) == JobOutcome(7, NOT_STARTED, signal.SIGTERM)
    assert reached == []
    assert {signum: signal.getsignal(signum) for signum in before} == before


@pytest.mark.parametrize(("code", "failure"), [(2, "exit status 2"), ("error", "exit status 1")])
def test_a_job_that_exits_otherwise_failed_and_others_still_start(code, failure, monkeypatch):
    def refused(number, overrides, context):
        sys.exit(code)

    assert run(refused, monkeypatch) == JobOutcome(7, FAILED, failure=failure)
    job_return = JobReturn(status=JobStatus.COMPLETED, _return_value=None)
    assert run(lambda *job: job_return, monkeypatch) == JobOutcome(
        7, FINISHED, job_return=job_return
    )


def test_a_worker_whose_sweep_is_gone_ends_on_a_stop_request_and_after_a_job(monkeypatch):
    ended = []
    monkeypatch.setattr(joblib_launcher.os, "_exit", ended.append)
    worker = joblib_launcher.worker_stop
    monkeypatch.setattr(worker, "sweep_process", os.getppid())
    worker.record(signal.SIGTERM, None)
    assert ended == []  # its sweep's process is there: it waits, and starts no further job
    monkeypatch.setattr(worker, "sweep_process", os.getppid() + 1)  # another process started it
    worker.record(signal.SIGTERM, None)
    assert ended == [0]
    monkeypatch.setattr(worker, "signal", None)
    job_return = JobReturn(status=JobStatus.COMPLETED, _return_value=None)
    run(lambda *job: job_return, monkeypatch)
    assert ended == [0, 0]
