"""Sweeps (`python train.py -m`): every job is checked before the first one starts, on local
launchers and clusters alike, and job directories have short, readable, unique names."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from replay.priority_signals import PRIORITY_SIGNALS
from training.sweep_checks import NAME_BYTES, job_directory_name

ROOT = Path(__file__).resolve().parents[1]
ENVIRONMENT = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
TINY = [  # a 12-step run
    "experiment=demo",
    "env.game=breakout",
    "agent.device=cpu",
    "threads=1",
    "train.total_steps=12",
    "train.batch_size=8",
    "train.learning_start_steps=8",
    "replay.capacity=64",
    "checkpoint.every_steps=5",
    "train.log_period_steps=5",
]
# The paper's values, given explicitly as a sweep of a dozen settings would.
MANY = [
    "train.epsilon_start=1.0",
    "train.epsilon_final=0.01",
    "train.reward_clip=1.0",
    "evaluation.epsilon=0.01",
    "agent.discount=0.99",
    "agent.learning_rate=0.00025",
]
CORES = len(os.sched_getaffinity(0))


def sweep(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "train.py", "-m", *arguments],
        cwd=ROOT,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def plugin_missing(module: str) -> bool:
    found = subprocess.run([sys.executable, "-c", f"import hydra_plugins.{module}"])
    return found.returncode != 0


def test_a_job_directory_is_named_by_its_overrides_within_the_length_limit():
    assert job_directory_name("replay=proportional,seed=0") == "replay=proportional,seed=0"
    assert job_directory_name("env.game=ALE/Pong-v5") == "env.game=ALE_Pong-v5"
    assert job_directory_name("") == "run"
    long = ",".join(f"train.setting_{i}={i}" for i in range(40))
    name = job_directory_name(long)
    assert len(name.encode()) == NAME_BYTES
    assert long.startswith(name[:-9]) and name[-9] == "-"
    other = job_directory_name(long.replace("=39", "=40"))
    assert other != name and other[:-9] == name[:-9]  # cut alike, told apart by the digest
    assert len(job_directory_name("é" * 200).encode()) <= NAME_BYTES  # not cut inside a letter


def test_a_sweep_with_many_overrides_runs_each_job_in_a_short_directory(tmp_path):
    sweep_dir = tmp_path / "sweep"
    done = sweep(*TINY, *MANY, "seed=0,1", f"hydra.sweep.dir={sweep_dir}")
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [path for path in sweep_dir.iterdir() if path.is_dir()]
    seeds = {yaml.safe_load((run / "config.yaml").read_text())["seed"]: run for run in runs}
    assert sorted(seeds) == [0, 1]
    for run in runs:
        # The seeds are cut off the names (keys come in alphabetical order): the digests at
        # their ends tell them apart.
        assert len(run.name.encode()) <= NAME_BYTES
        assert run.name.startswith("agent.device=cpu,agent.discount=0.99,")
        assert (run / "agent_final.pt").is_file()
    # Which overrides each job ran: the sweep's in multirun.yaml, each job's values in its
    # config.yaml (above).
    recorded = yaml.safe_load((sweep_dir / "multirun.yaml").read_text())
    assert recorded["hydra"]["overrides"]["task"] == [*TINY, *MANY, "seed=0,1"]


def test_a_job_hydra_cannot_compose_ends_the_sweep_before_any_job_starts(tmp_path):
    done = sweep(*TINY, "replay=uniform,sorted", f"hydra.sweep.dir={tmp_path}/sweep")
    assert done.returncode == 1
    assert done.stderr == (
        "error: job 1 (replay=sorted): In 'config': Could not find 'replay/sorted' Available "
        "options in 'replay': proportional rank_based uniform\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_jobs_that_would_share_a_run_directory_end_the_sweep_before_any_job_starts(tmp_path):
    done = sweep(
        *TINY,
        "seed=0,1",
        f"hydra.sweep.dir={tmp_path}/sweep",
        "hydra.job.config.override_dirname.exclude_keys=[seed]",
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"error: job 1 (seed=1) and job 0 (seed=0) would share the run directory {tmp_path}/sweep/"
    )
    assert done.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_a_local_sweep_checks_what_depends_on_this_machine(tmp_path):
    done = sweep(
        *TINY,
        f"threads={CORES + 1}",
        "replay.priority_signal=td_error,bogus",
        f"hydra.sweep.dir={tmp_path}/sweep",
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"error: job 0 (replay.priority_signal=td_error): threads={CORES + 1} is not allowed"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(
    plugin_missing("hydra_submitit_launcher"), reason="hydra-submitit-launcher is not installed"
)
def test_a_cluster_sweep_leaves_what_depends_on_the_machine_to_its_jobs(tmp_path):
    """Its jobs run on other machines: more threads than this one has cores may be right
    there, and are not refused here; the other settings are."""
    done = sweep(
        "hydra/launcher=slurm",
        *TINY,
        f"threads={CORES + 1}",
        "replay.priority_signal=td_error,bogus",
        f"hydra.sweep.dir={tmp_path}/sweep",
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: job 1 (replay.priority_signal=bogus): replay.priority_signal=bogus is not "
        f"allowed: must be one of {', '.join(PRIORITY_SIGNALS)}\n"
    )
    assert list(tmp_path.iterdir()) == []
