"""The sweep checks look at the sweep as a whole, in the sweep's process as Hydra runs them
(its callback, on the config Hydra composes for a multirun): jobs that are one run, the disk
all jobs need together, and a stop while they run. Subprocess sweeps: tests/test_sweeps.py."""

import os
import shutil
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode

from artifacts.command_line import size_text
from launch import run_guard, sweep_checks

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
TINY = [
    "experiment=demo",
    "env.game=breakout",
    "agent.device=cpu",
    "threads=1",
    "train.batch_size=8",
    "replay.capacity=500",
]


@contextmanager
def sweep_config(*overrides: str):
    """The config of `python train.py -m OVERRIDES`, while Hydra is set up as for the sweep."""
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        yield loader.load_configuration("config", list(overrides), RunMode.MULTIRUN)


def checked(*overrides: str) -> None:
    with sweep_config(*overrides) as config:
        sweep_checks.SweepChecks().on_multirun_start(config)


def refusal(capsys, *overrides: str) -> str:
    with pytest.raises(SystemExit) as end:
        checked(*overrides)
    assert end.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("sweep", "same"),
    [
        ("env.game=breakout,Breakout", "env.game=Breakout is env.game=breakout"),
        ("train.reward_clip=1,1.0", "train.reward_clip=1.0 is train.reward_clip=1"),
        (
            "agent.learning_rate=0.00025,2.5e-4",
            "agent.learning_rate=0.00025,2.5e-4 repeats a value",
        ),
    ],
)
def test_jobs_that_are_one_run_written_two_ways_are_refused_naming_both(
    sweep, same, tmp_path, capsys
):
    key = sweep.split("=")[0]
    values = sweep.split("=")[1].split(",")
    err = refusal(capsys, *TINY, sweep, "seed=0,1", f"hydra.sweep.dir={tmp_path}/s")
    first, second = (f"{key}={value}" for value in values)
    labels = (
        "job 2 (seed=0) and job 0 (seed=0)"
        if first == second or "repeats" in same
        else f"job 2 ({second} seed=0) and job 0 ({first} seed=0)"
    )
    assert err == f"error: {labels} are the same run ({same}): give each value once\n"
    assert list(tmp_path.iterdir()) == []


def with_free_disk(monkeypatch, free: int) -> None:
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=free))


def needs(*overrides: str) -> tuple[int, int]:
    """One job's files: while it runs, and once it has finished."""
    with sweep_config(*overrides) as config:
        return run_guard.run_disk_bytes(config), run_guard.run_disk_bytes(config, 1)


@pytest.mark.parametrize(
    ("launcher", "at_once"),
    [("hydra/launcher=basic", 1), ("hydra/launcher=local_parallel", 2)],
)
def test_the_disk_must_hold_every_job_together_as_they_run(
    launcher, at_once, tmp_path, capsys, monkeypatch
):
    """Each job alone fits. One after the other, three jobs need what the two finished ones
    keep (a checkpoint each) and all the third needs; two at a time, what two running jobs
    need beside the one finished."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep = [*TINY, launcher, "checkpoint.keep=50", "seed=0,1,2", f"hydra.sweep.dir={tmp_path}/s"]
    running, finished = needs(*TINY, "checkpoint.keep=50")
    together = 3 * finished + at_once * (running - finished)
    with_free_disk(monkeypatch, together)
    checked(*sweep)
    assert capsys.readouterr().err == ""
    with_free_disk(monkeypatch, together - 1)
    err = refusal(capsys, *sweep)
    assert err == (
        f"error: the sweep's 3 unfinished jobs, {at_once} at a time, need "
        f"{size_text(together)} more on the disk of {tmp_path} (each finished job "
        f"keeps a checkpoint and its snapshots) and it has {size_text(together - 1)} "
        "free: lower checkpoint.keep or replay.capacity, run fewer jobs at a time "
        "(hydra.launcher.n_jobs), or give hydra.sweep.dir on a larger disk\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def stop_handlers():
    """A SIGTERM that no handler of the checks catches is recorded here, not the test's end."""
    received = []
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    yield received
    for signum, handler in before.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_stop_while_the_jobs_are_checked_ends_the_sweep_in_one_line_with_nothing_written(
    signum, status, stop_handlers, tmp_path, capsys, monkeypatch
):
    def stopped(config, jobs):
        os.kill(os.getpid(), signum)
        pytest.fail("the checks went on after the stop")

    monkeypatch.setattr(sweep_checks, "check_sweep", stopped)
    monkeypatch.setattr(sys, "argv", ["train.py", "-m", "seed=0,1"])
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(SystemExit) as end:
        checked(*TINY, "seed=0,1", f"hydra.sweep.dir={tmp_path}/s")
    assert end.value.code == status
    assert capsys.readouterr().err == (
        f"sweep stopped by {signal.Signals(signum).name} while its jobs were checked, before "
        f"any of them started; run it with: python train.py -m seed=0,1 "
        f"hydra.sweep.dir={tmp_path}/s\n"
    )
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # as they were
    assert list(tmp_path.iterdir()) == []
