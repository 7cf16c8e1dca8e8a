"""How a job ends, through train.py: its run directory's lock is released however it ends, a
run whose final snapshot exists is finished whatever its checkpoints, and the command a
stopped run prints works pasted into a shell."""

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.test_resume import ARGUMENTS, ENVIRONMENT, ROOT, complete, launch, stderr
from training.checkpoints import CheckpointStore

SHORT = [*ARGUMENTS, "train.total_steps=60", "checkpoint.every_steps=25"]

# `python -c JOB_THEN_LOCK RUN_DIR STOP_STEP ARGUMENTS...` runs train.py's job in this process
# (sending itself SIGTERM before agent step STOP_STEP, unless it is 0), prints its exit status,
# then takes the run directory's lock as a next job of this process would, and prints whether
# it could.
JOB_THEN_LOCK = """
import fcntl, os, runpy, signal, sys
from training import loop
run_dir, stop_step = sys.argv.pop(1), int(sys.argv.pop(1))
act_and_store = loop.Training._act_and_store
def signal_then_act(self):
    if self.step == stop_step:
        os.kill(os.getpid(), signal.SIGTERM)
    act_and_store(self)
loop.Training._act_and_store = signal_then_act
sys.argv[0] = "train.py"
try:
    runpy.run_path("train.py", run_name="__main__")
    print("exit 0")
except SystemExit as exit:
    print(f"exit {exit.code or 0}")
try:
    fcntl.flock(os.open(run_dir, os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("unlocked")
except BlockingIOError:
    print("locked")
"""

# `python -c KILLED_IN_CLEANUP ARGUMENTS...` runs train.py, killed (SIGKILL) as its last step
# begins to delete the checkpoints a finished run does not keep.
KILLED_IN_CLEANUP = """
import os, runpy, signal, sys
from training.checkpoints import CheckpointStore
CheckpointStore.keep_latest_only = lambda self: os.kill(os.getpid(), signal.SIGKILL)
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished run: checkpoints at steps 25, 50 and 60, of which it keeps the last."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    complete(run_dir, *SHORT, f"hydra.run.dir={run_dir}")
    return run_dir


def python(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=ROOT,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


# how a job ends: (the SIGTERM's step or 0, its exit status, the end of its stderr)
ENDINGS = {
    "trained to its end": (0, 0, ""),
    "stopped by SIGTERM": (30, 0, "stopped by SIGTERM at step 30; resume with: python train.py "),
    "finished before": (0, 0, "run {run} is finished: nothing to do"),
    "refused": (0, 2, "error: run directory {run} holds a different run: seed is 0 there, 1 here"),
}


@pytest.mark.parametrize("how", ENDINGS)
def test_a_run_directory_is_unlocked_when_its_job_ends_however_it_ends(finished, tmp_path, how):
    """A sweep's worker runs job after job: a job that ended holds no lock (nor descriptor)
    while the worker lives on."""
    stop_step, status, last_line = ENDINGS[how]
    run_dir = tmp_path / "run"
    arguments = [*SHORT, f"hydra.run.dir={run_dir}"]
    if how in ("finished before", "refused"):
        shutil.copytree(finished, run_dir)
        arguments = [f"resume={run_dir}"] if how == "finished before" else [*arguments, "seed=1"]
    result = python("-c", JOB_THEN_LOCK, str(run_dir), str(stop_step), *arguments)
    assert result.stdout.splitlines()[-2:] == [f"exit {status}", "unlocked"], result.stderr
    assert result.stderr.splitlines()[-1].startswith(last_line.format(run=run_dir))
    assert (run_dir / "agent_final.pt").exists() == (how != "stopped by SIGTERM")


@pytest.mark.parametrize("command", ["resume", "the same command"])
def test_a_run_whose_checkpoints_were_deleted_is_finished(finished, tmp_path, command):
    """As a user frees the disk of finished runs and runs the sweep's command again."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    shutil.rmtree(run_dir / "checkpoints")
    before = files(run_dir)
    arguments = [f"resume={run_dir}"] if command == "resume" else SHORT
    result = python("train.py", *arguments, f"hydra.run.dir={run_dir}")
    assert (result.returncode, result.stderr) == (0, f"run {run_dir} is finished: nothing to do\n")
    assert files(run_dir) == before


def test_a_run_stopped_in_its_last_cleanup_is_finished_and_its_next_command_completes_it(
    tmp_path,
):
    run_dir = tmp_path / "run"
    killed = python("-c", KILLED_IN_CLEANUP, *SHORT, f"hydra.run.dir={run_dir}")
    assert killed.returncode == -9, killed.stderr
    store = CheckpointStore(run_dir / "checkpoints")
    assert [path.name for path in store.state_files()] == [
        "state-000000000050-frames1.pt",
        "state-000000000060-frames0.pt",
    ]
    older = {f"checkpoints/{name}" for name in ("state-000000000050-frames1.pt", "frames-1.bin")}
    older.add("checkpoints/frames-1.json")
    kept = {name: data for name, data in files(run_dir).items() if name not in older}
    result = python("train.py", f"resume={run_dir}")
    assert (result.returncode, result.stderr) == (
        0,
        f"run {run_dir} is finished: removed the checkpoints before its last, which its "
        "interrupted end left; nothing else to do\n",
    )
    assert files(run_dir) == kept


def test_a_finished_run_on_a_read_only_disk_is_finished(finished, small_file_system):
    run_dir = small_file_system(64 * 2**20) / "run"
    shutil.copytree(finished, run_dir)
    subprocess.run(["mount", "-o", "remount,ro", run_dir.parent], check=True)
    result = python("train.py", f"resume={run_dir}")
    assert (result.returncode, result.stderr) == (0, f"run {run_dir} is finished: nothing to do\n")


def test_the_resume_line_of_a_run_stopped_in_an_awkward_directory_works_pasted_into_a_shell(
    tmp_path,
):
    """`run b,c`: a space splits a shell's words, and a comma makes a sweep of Hydra's value."""
    run_dir = tmp_path / "run b,c"
    quoted = f'hydra.run.dir="{run_dir}"'  # as Hydra's grammar reads it
    process = launch(run_dir, *SHORT, quoted, at_step=30, signals="SIGTERM")
    assert process.wait(timeout=600) == 0, stderr(run_dir)
    command = stderr(run_dir).splitlines()[-1].split("resume with: ", 1)[1]
    assert command.startswith("python train.py ")
    pasted = command.replace("python", shlex.quote(sys.executable), 1)
    resumed = subprocess.run(
        ["sh", "-c", pasted], cwd=ROOT, env=ENVIRONMENT, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr
    assert (run_dir / "agent_final.pt").is_file()
