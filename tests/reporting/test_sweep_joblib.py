"""The launcher presets compose; a real 2 × 2 sweep of tiny train.py runs through the joblib
preset, then its report: each run in its own directory named by its overrides, and the report
files written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from reporting.__main__ import main as report_main

ROOT = Path(__file__).resolve().parents[2]
# Settings that make a run tiny; excluded from the directory names so that those show what the
# sweep varies, as a real sweep would.
TINY = {
    "experiment": "demo",
    "train.total_steps": 200,
    "train.learning_start_steps": 100,
    "train.log_period_steps": 100,
    "replay.capacity": 300,
    "env.max_episode_frames": 400,
    "evaluation.every_frames": 400,
    "evaluation.frames": 200,
    "checkpoint.every_steps": 200,
}
# The project's launcher for both joblib presets (launch/joblib_launcher.py).
PROJECT_JOBLIB = "hydra_plugins.per_atari.launchers.LocalParallelLauncher"


def plugin_missing(module: str) -> bool:
    return (
        subprocess.run(
            [sys.executable, "-c", f"import hydra_plugins.{module}"], capture_output=True
        ).returncode
        != 0
    )


def launcher_config(preset: str):
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("config", [f"hydra/launcher={preset}"], return_hydra_config=True)


@pytest.mark.skipif(
    plugin_missing("hydra_submitit_launcher"), reason="hydra-submitit-launcher is not installed"
)
def test_slurm_preset_is_submitit_with_one_gpu_and_requeues():
    launcher = launcher_config("slurm").hydra.launcher
    assert launcher._target_ == "hydra_plugins.per_atari.launchers.SlurmLauncher"
    assert (launcher.gpus_per_node, launcher.timeout_min, launcher.max_num_timeout) == (1, 1440, 6)


@pytest.mark.skipif(
    plugin_missing("hydra_joblib_launcher"), reason="hydra-joblib-launcher is not installed"
)
def test_local_parallel_preset_is_joblib_with_two_jobs():
    launcher = launcher_config("local_parallel").hydra.launcher
    assert launcher._target_ == PROJECT_JOBLIB and launcher.n_jobs == 2


@pytest.mark.skipif(
    plugin_missing("hydra_joblib_launcher"), reason="hydra-joblib-launcher is not installed"
)
def test_shared_gpu_preset_runs_eight_jobs_with_their_share_of_the_cores(monkeypatch):
    launcher = launcher_config("shared_gpu").hydra.launcher
    assert launcher._target_ == PROJECT_JOBLIB and launcher.n_jobs == 8
    # What each run's `threads: auto` sees inside a joblib worker: cores // n_jobs.
    from joblib import Parallel, delayed  # the plugin's dependency

    from launch.run_guard import torch_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # a user's setting would win
    threads = Parallel(n_jobs=2, backend="loky")(delayed(torch_threads)("auto") for _ in range(2))
    assert threads == [max(1, len(os.sched_getaffinity(0)) // 2)] * 2


@pytest.mark.skipif(
    plugin_missing("hydra_joblib_launcher"), reason="hydra-joblib-launcher is not installed"
)
def test_joblib_sweep_then_report(tmp_path):
    sweep_dir = tmp_path / "multirun"
    command = [
        sys.executable,
        "train.py",
        "-m",
        "hydra/launcher=local_parallel",
        "replay=uniform,proportional",
        "seed=0,1",
        *[f"{key}={value}" for key, value in TINY.items()],
        f"hydra.sweep.dir={sweep_dir}",
        f"hydra.job.config.override_dirname.exclude_keys=[{','.join(TINY)}]",
    ]
    # One torch thread per run: the two parallel runs share two cores.
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = sorted(p.name for p in sweep_dir.iterdir() if p.is_dir())
    assert runs == [
        "replay=proportional,seed=0",
        "replay=proportional,seed=1",
        "replay=uniform,seed=0",
        "replay=uniform,seed=1",
    ]
    for run in runs:
        assert (sweep_dir / run / "config.yaml").is_file()
        assert any((sweep_dir / run / "tensorboard").iterdir())

    report_main([str(sweep_dir), "--out", str(tmp_path / "report")])
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| Pong | uniform | 2 |" in text and "| Pong | proportional | 2 |" in text
    assert (tmp_path / "report" / "learning_curves_pong.png").is_file()
    assert (tmp_path / "report" / "learning_speed.png").is_file()
