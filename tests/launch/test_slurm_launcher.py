"""What a sweep on SLURM says of a job that ends without a result, and that it stops waiting
for a job SLURM no longer knows: the launcher's wait over stand-ins for submitit's jobs; and
that a job finds the project (the real cluster: tests/integration)."""

import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from omegaconf import OmegaConf

import train

# The cluster extra (`slurm`): without it these tests skip, and the rest of a run (such as
# `pytest -k cuda` on a GPU machine) still collects.
pytest.importorskip("submitit")
pytest.importorskip("hydra_plugins.hydra_submitit_launcher")

from submitit.core.utils import UncompletedJobError  # noqa: E402

from launch import slurm_launcher  # noqa: E402
from launch.slurm_launcher import PreemptibleSlurmLauncher  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LABELS = ["job 0 (seed=0)", "job 1 (seed=1)"]
UNFINISHED = ("PENDING", "RUNNING", "UNKNOWN")


class Job:
    """A submitit job as the launcher sees it: its state at each look (the last one stays),
    and its result, or None where it left none."""

    def __init__(self, tmp_path: Path, job_id: str, states: list[str], result: JobReturn | None):
        self.job_id, self.states, self.result = job_id, list(states), result
        self.paths = SimpleNamespace(stderr=tmp_path / f"{job_id}_0_log.err")

    @property
    def state(self) -> str:
        return self.states[0]

    def done(self) -> bool:
        if len(self.states) > 1:
            self.states.pop(0)
        return self.state not in UNFINISHED

    def results(self) -> list[JobReturn]:
        if self.result is None:
            raise UncompletedJobError(f"job {self.job_id} has no result")
        return [self.result]


COMPLETED = JobReturn(status=JobStatus.COMPLETED, _return_value=None)


def test_a_stopped_sweep_job_is_resumed_by_the_sweeps_command():
    sweep = OmegaConf.create({"mode": RunMode.MULTIRUN, "sweep": {"dir": "multirun/pong"}})
    single = OmegaConf.create({"mode": RunMode.RUN, "sweep": {"dir": "multirun/pong"}})
    run = Path("multirun/pong/seed=1")
    assert train.resume_command(run, sweep) == (
        "the sweep's command with hydra.sweep.dir=multirun/pong"
    )
    # Hydra reads `=` in a value only quoted: `resume=multirun/pong/seed=1` is refused.
    assert train.resume_command(run, single) == (
        "python train.py 'resume=\"multirun/pong/seed=1\"'"
    )


def test_a_cancelled_job_is_named_with_the_runs_own_last_line(tmp_path):
    sweep = OmegaConf.create({"mode": RunMode.MULTIRUN, "sweep": {"dir": "multirun/pong"}})
    stopped = (
        "stopped by SIGTERM at step 108; resume with: "
        f"{train.resume_command(Path('multirun/pong/seed=1'), sweep)}"
    )
    jobs = [
        Job(tmp_path, "16_0", ["RUNNING", "COMPLETED"], COMPLETED),
        Job(tmp_path, "16_1", ["RUNNING", "CANCELLED by 0"], None),
    ]
    jobs[1].paths.stderr.write_text(f"A.L.E: Arcade Learning Environment\n{stopped}\nsrun: ...\n")
    returns, failures = PreemptibleSlurmLauncher._wait(jobs, LABELS, unknown_limit_s=3600)
    assert returns == [COMPLETED]
    assert failures == [
        "error: job 1 (seed=1), SLURM job 16_1, ended CANCELLED by 0: stopped by SIGTERM at step "
        "108; resume with: the sweep's command with hydra.sweep.dir=multirun/pong; its log: "
        f"{jobs[1].paths.stderr}"
    ]


def test_a_job_whose_state_stays_unknown_is_given_up_and_the_others_are_kept(tmp_path):
    jobs = [
        Job(tmp_path, "16_0", ["RUNNING", "COMPLETED"], COMPLETED),
        Job(tmp_path, "16_1", ["UNKNOWN"], None),
    ]
    returns, failures = PreemptibleSlurmLauncher._wait(jobs, LABELS, unknown_limit_s=0)
    assert returns == [COMPLETED]
    assert failures == [
        "error: job 1 (seed=1), SLURM job 16_1: its state has been UNKNOWN for 0 min, its time "
        f"limit (sacct does not know it): no longer waited for; its log: {jobs[1].paths.stderr}"
    ]


def test_a_job_unknown_for_less_than_its_time_limit_is_waited_for(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm_launcher, "POLL_SECONDS", 0)
    states = ["UNKNOWN", "UNKNOWN", "PENDING", "UNKNOWN", "RUNNING", "COMPLETED"]
    jobs = [Job(tmp_path, "16_0", states, COMPLETED)]
    assert PreemptibleSlurmLauncher._wait(jobs, LABELS[:1], unknown_limit_s=3600) == (
        [COMPLETED],
        [],
    )


def test_a_job_started_outside_the_checkout_imports_the_launcher(tmp_path, monkeypatch):
    """The project is not installed: the job's script puts the sweep's checkout on PYTHONPATH
    before the user's setup lines, so that a job SLURM starts in another directory unpickles
    the launcher (and train.py's task)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text("")  # submitit writes a script only beside srun
    (tmp_path / "bin" / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        preset = compose("config", ["hydra/launcher=slurm"], return_hydra_config=True)
    params = OmegaConf.to_container(preset.hydra.launcher)
    params.pop("_target_")
    params.update(submitit_folder=str(tmp_path / ".submitit"), setup=["echo user setup"])
    executor = PreemptibleSlurmLauncher(**params)._executor()
    script = executor._executor._make_submission_file_text("true", "0")
    setup = script.split("# setup\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert setup[1:] == ["echo user setup"]
    job = [*setup, f"{shlex.quote(sys.executable)} -c 'import launch.slurm_launcher'"]
    done = subprocess.run(
        ["bash", "-c", "\n".join(job)],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "user setup\n"


def test_hydra_finds_the_launcher_in_the_checkout_without_importing_the_project():
    """Hydra imports every plugin at the start of a run of train.py: this one costs no more
    than its own module."""
    discover = (
        "import sys; from hydra.core.plugins import Plugins; "
        "from hydra.plugins.launcher import Launcher; "
        "found = [f'{c.__module__}.{c.__name__}' for c in Plugins.instance().discover(Launcher)]; "
        "print('hydra_plugins.per_atari.launchers.SlurmLauncher' in found, "
        "sorted({'torch', 'training'} & set(sys.modules)))"
    )
    found = subprocess.run(
        [sys.executable, "-c", discover], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert found.stdout == "True []\n", found.stderr
