"""Sweeps (`python train.py -m`): every job is checked before the first one starts, on local
launchers and clusters alike, and job directories have short, readable, unique names."""

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from artifacts.provenance import code_state, read_starts
from launch.sweep_checks import NAME_BYTES, job_directory_name
from replay.priority_signals import PRIORITY_SIGNALS

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
    assert job_directory_name(["seed=0", "replay=proportional"]) == "replay=proportional,seed=0"
    assert job_directory_name(["env.game=ALE/Pong-v5"]) == "env.game=ALE_Pong-v5"
    assert job_directory_name(["experiment=demo", "seed=1"], ["experiment"]) == "seed=1"
    assert job_directory_name(["seed=1"], ["seed"]) == "run"
    assert job_directory_name(["+a.b=1", "seed=2"], [], ":", ";") == "+a.b:1;seed:2"
    # A long value: each key stays in the name, the value is its beginning and a digest.
    long = ["env.game=pong", f"agent.layers=[{','.join(['512'] * 40)}]"]
    name = job_directory_name(long)
    assert name.startswith("agent.layers=[512,5") and name.endswith(",env.game=pong")
    assert len(name.encode()) <= NAME_BYTES
    other = job_directory_name([long[0], long[1].replace("512]", "256]")])
    assert other != name and other[:19] == name[:19]  # alike at first, told apart by the digest
    # Too many keys for that: cut, ending in a digest of all of them.
    many = [f"train.setting_{i}={i}" for i in range(40)]
    cut = job_directory_name(many)
    assert len(cut.encode()) == NAME_BYTES and cut[-9] == "-"
    assert ",".join(sorted(many)).startswith(cut[:-9])
    assert job_directory_name([*many[:-1], "train.setting_39=40"]) != cut
    accented = job_directory_name([f"a{i}='{'é' * 30}'" for i in range(9)])
    assert len(accented.encode()) <= NAME_BYTES  # not cut inside a letter


def test_jobs_are_named_by_the_keys_the_sweep_varies_and_a_rerun_finds_them(tmp_path):
    sweep_dir = tmp_path / "sweep"
    earlier = sweep_dir / "replay.priority_exponent=0.4,seed=0"  # named by another command
    earlier.mkdir(parents=True)
    (earlier / "config.yaml").write_text("seed: 0\n")
    arguments = [*TINY, *MANY, "replay=proportional", f"hydra.sweep.dir={sweep_dir}"]
    done = sweep(*arguments, "replay.priority_exponent=0.4,0.6")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        f"note: {sweep_dir} holds runs that no job of this sweep is named for, left as they "
        f"are: {earlier.name} (jobs are named by the keys the sweep varies)\n"
    ) in done.stderr
    for alpha in (0.4, 0.6):
        run = sweep_dir / f"replay.priority_exponent={alpha}"
        assert yaml.safe_load((run / "config.yaml").read_text())["replay"]["priority_exponent"] == (
            alpha
        )
        assert (run / "agent_final.pt").is_file()
        # What made the run, beside its config: the code's commit and the libraries.
        (start,) = read_starts(run / "provenance.yaml")
        assert start["step"] == 0 and start["commit"] == code_state()[0]
        assert start["torch"] == metadata.version("torch")
    # Which overrides the sweep ran, and the keys it left out of the names: multirun.yaml.
    recorded = yaml.safe_load((sweep_dir / "multirun.yaml").read_text())["hydra"]
    assert recorded["overrides"]["task"] == [
        *TINY,
        *MANY,
        "replay=proportional",
        "replay.priority_exponent=0.4,0.6",
    ]
    fixed = sorted(override.split("=")[0] for override in [*TINY, *MANY, "replay=proportional"])
    assert recorded["job"]["config"]["override_dirname"]["exclude_keys"] == fixed
    # The same command again finds each job's run, and the values in another order too.
    again = sweep(*arguments, "replay.priority_exponent=0.6,0.4")
    assert again.returncode == 0, again.stderr[-3000:]
    for alpha in (0.6, 0.4):
        run = sweep_dir / f"replay.priority_exponent={alpha}"
        assert f"run {run} is finished: nothing to do" in again.stderr


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
