"""A `local_parallel` sweep stopped by a signal, with real processes: every running job writes
its checkpoint, no further job starts, every process of the sweep ends, and the command the
sweep prints resumes and finishes every job; run once more, it finds them finished."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.checkpoints import CheckpointStore

ROOT = Path(__file__).resolve().parents[1]
HELD_STEP, TOTAL_STEPS = 40, 120
# Tiny runs on two workers, each testing itself every 40 steps in its evaluation worker and
# checkpointing every 40 steps, held after step 40 until they are asked to stop
# (tests/sweep_pause.py); their directories are named by the seed alone. No hydra.sweep.dir:
# the sweep's default, timestamped directory is the one a resume must name.
SWEEP = [
    str(ROOT / "train.py"),
    "-m",
    "hydra/launcher=local_parallel",
    "experiment=demo",
    "env.game=breakout",
    "agent.device=cpu",
    "threads=1",
    f"train.total_steps={TOTAL_STEPS}",
    "train.batch_size=8",
    "train.learning_start_steps=20",
    "train.log_period_steps=20",
    "replay.capacity=2000",
    "env.max_episode_frames=400",
    f"evaluation.every_frames={4 * HELD_STEP}",
    "evaluation.frames=200",
    f"checkpoint.every_steps={HELD_STEP}",
    "+hydra.callbacks.pause._target_=sweep_pause.PauseAfterStep",
    f"+hydra.callbacks.pause.step={HELD_STEP}",
    "hydra.job.config.override_dirname.exclude_keys=[experiment,env.game,agent.device,threads,"
    "train.total_steps,train.batch_size,train.learning_start_steps,train.log_period_steps,"
    "replay.capacity,env.max_episode_frames,evaluation.every_frames,evaluation.frames,"
    "checkpoint.every_steps]",
]
# The same sweep, its jobs not held: one that a stop finds anywhere, resumed to its end.
UNHELD = [argument for argument in SWEEP if "callbacks.pause" not in argument]
ENVIRONMENT = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "TQDM_DISABLE": "1",
    # tests/sweep_pause.py, for the sweep's process and its workers
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), os.getenv("PYTHONPATH")])),
}
WAIT_SECONDS = 300  # for a sweep to start, or to finish its jobs: ample on a busy 2-core machine
STOP_SECONDS = 120  # for every process of a sweep to end once it is asked to stop
JOB_STOPPED = re.compile(
    r"^stopped by (?:SIGTERM|SIGINT) at step (\d+); resume with: the sweep's command with "
    r"hydra\.sweep\.dir=(\S+)$",
    re.MULTILINE,
)
SWEEP_STOPPED = re.compile(r"sweep stopped by (\w+) \(jobs: ([^)]*)\); resume with: (python .*)")


def plugin_missing() -> bool:
    found = subprocess.run([sys.executable, "-c", "import hydra_plugins.hydra_joblib_launcher"])
    return found.returncode != 0


pytestmark = pytest.mark.skipif(plugin_missing(), reason="hydra-joblib-launcher is not installed")


def group(session: int) -> dict[int, str]:
    """The live processes of the process group `session` (the sweep and all it started, which
    stay in its group, orphaned or not): pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or os.getpgid(int(entry.name)) != session:
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # ended, not yet collected
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (ProcessLookupError, FileNotFoundError):
            continue
    return found


def until(condition, what: str, log: Path, deadline: float) -> None:
    while not condition():
        assert time.monotonic() < deadline, f"no {what} in time: {log.read_text()}"
        time.sleep(0.1)


def run_dirs(cwd: Path) -> list[Path]:
    return sorted(cwd.glob("multirun/*/seed=*"))


def held(sweep: subprocess.Popen, cwd: Path, log: Path) -> bool:
    """Whether two jobs hold at their checkpoint at HELD_STEP (the third waits for a worker)."""
    assert sweep.poll() is None, log.read_text()
    steps = [CheckpointStore(run / "checkpoints").latest_step() for run in run_dirs(cwd)]
    return steps == [HELD_STEP, HELD_STEP]


def start_and_stop(
    cwd: Path, arguments: list[str], send, ready=None, program=SWEEP
) -> tuple[subprocess.Popen, str]:
    """Start the sweep `program` with `arguments` in its own process group, wait until two
    jobs hold at their checkpoint (each loop beside its evaluation worker), or until `ready`
    (the sweep's pid -> bool), `send` it a signal, and wait until every process of it has
    ended; its stderr."""
    log = cwd / "sweep.stderr"
    with open(log, "w") as stderr:
        sweep = subprocess.Popen(
            [sys.executable, *program, *arguments],
            cwd=cwd,
            env=ENVIRONMENT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        waited = (lambda: held(sweep, cwd, log)) if ready is None else lambda: ready(sweep.pid)
        until(waited, "hold", log, time.monotonic() + WAIT_SECONDS)
        running = group(sweep.pid).values()
        assert ready or sum("evaluation_worker" in command for command in running) == 2
        send(sweep.pid)
        deadline = time.monotonic() + STOP_SECONDS
        sweep.wait(timeout=STOP_SECONDS)
        until(lambda: not group(sweep.pid), "end of every process of the sweep", log, deadline)
    finally:
        if group(sweep.pid):  # a failed test leaves nothing behind either
            os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
    return sweep, log.read_text()


def stopped_with_checkpoints(cwd: Path, stderr: str) -> tuple[str, str, str]:
    """Assert that each running job stopped where it was held (at its checkpoint, or at the next
    step if the stop found it holding) with a checkpoint at that step, and that no other job
    started; the sweep's last line: the signal, how its jobs ended, and the resume command."""
    runs = run_dirs(cwd)
    assert len(runs) == 2, stderr
    stops = JOB_STOPPED.findall(stderr)
    assert {sweep_dir for _, sweep_dir in stops} == {str(runs[0].parent.relative_to(cwd))}
    steps = sorted(int(step) for step, _ in stops)
    assert len(steps) == 2 and {HELD_STEP, HELD_STEP + 1}.issuperset(steps), stderr
    assert steps == sorted(CheckpointStore(run / "checkpoints").latest_step() for run in runs)
    return SWEEP_STOPPED.fullmatch(stderr.splitlines()[-1]).groups()


def rerun(cwd: Path, command: str) -> subprocess.CompletedProcess:
    """The printed command, run from where the sweep was started."""
    program, *arguments = shlex.split(command)
    assert program == "python"
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=cwd,
        env=ENVIRONMENT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=WAIT_SECONDS,
    )


def test_sigterm_to_a_local_sweep_checkpoints_every_job_and_its_command_resumes_them(tmp_path):
    sweep, stderr = start_and_stop(tmp_path, ["seed=0,1"], lambda pid: os.kill(pid, signal.SIGTERM))
    assert sweep.returncode == 0, stderr  # as train.py after SIGTERM: done, resumable
    signal_name, jobs, command = stopped_with_checkpoints(tmp_path, stderr)
    assert (signal_name, jobs) == ("SIGTERM", "2 stopped")
    sweep_dir = run_dirs(tmp_path)[0].parent.relative_to(tmp_path)
    assert shlex.split(command) == ["python", *SWEEP, "seed=0,1", f"hydra.sweep.dir={sweep_dir}"]

    resumed = rerun(tmp_path, command)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert JOB_STOPPED.search(resumed.stderr) is None  # resumed past the step they held at
    for run in run_dirs(tmp_path):
        assert CheckpointStore(run / "checkpoints").latest_step() == TOTAL_STEPS
    final = [(run / "agent_final.pt").stat().st_mtime_ns for run in run_dirs(tmp_path)]
    again = rerun(tmp_path, command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("is finished: nothing to do") == 2
    assert [(run / "agent_final.pt").stat().st_mtime_ns for run in run_dirs(tmp_path)] == final


def workers(session: int) -> list[int]:
    """The sweep's workers, one per running job."""
    return sorted(pid for pid, command in group(session).items() if "popen_loky_posix" in command)


def test_ctrl_c_stops_a_local_sweep_with_checkpoints_and_exits_130(tmp_path):
    """A terminal's Ctrl-C: SIGINT to every process of the sweep at once."""

    def ctrl_c(pid: int) -> None:
        assert len(workers(pid)) == 2
        os.killpg(pid, signal.SIGINT)

    sweep, stderr = start_and_stop(tmp_path, ["seed=0,1", "hydra.launcher.n_jobs=3"], ctrl_c)
    assert sweep.returncode == 130, stderr
    signal_name, jobs, _ = stopped_with_checkpoints(tmp_path, stderr)
    assert (signal_name, jobs) == ("SIGINT", "2 stopped")


def test_sigterm_to_one_worker_stops_the_whole_sweep_with_checkpoints(tmp_path):
    def one_worker(pid: int) -> None:
        os.kill(workers(pid)[0], signal.SIGTERM)

    sweep, stderr = start_and_stop(tmp_path, ["seed=0,1,2"], one_worker)
    assert sweep.returncode == 0, stderr
    signal_name, jobs, _ = stopped_with_checkpoints(tmp_path, stderr)
    assert (signal_name, jobs) == ("SIGTERM", "2 stopped, 1 not started")


def test_a_worker_that_dies_stops_the_sweep_with_the_other_jobs_checkpointed(tmp_path):
    """What the out-of-memory killer does: SIGKILL to one worker in the middle of its job."""
    sweep, stderr = start_and_stop(
        tmp_path, ["seed=0,1"], lambda pid: os.kill(workers(pid)[0], signal.SIGKILL)
    )
    assert sweep.returncode == 1, stderr  # a failure, not a stop that was honoured
    assert "Traceback" not in stderr
    ((step, _),) = JOB_STOPPED.findall(stderr)  # the other running job
    assert int(step) in (HELD_STEP, HELD_STEP + 1)
    runs = run_dirs(tmp_path)
    steps = [CheckpointStore(run / "checkpoints").latest_step() for run in runs]
    assert sorted(steps) == sorted([HELD_STEP, int(step)])  # the dead job's last periodic one
    # Its line is the sweep's last; the dead job's own children (its evaluation worker, the
    # resource tracker of its semaphores) may still write as they notice it is gone.
    (died,) = re.finditer(
        r"^sweep stopped: the worker of job \d \(seed=\d\) died \(killed by SIGKILL\) "
        r"\(jobs: 1 stopped, 1 died\); resume with: (python .*)$",
        stderr,
        re.MULTILINE,
    )
    assert stderr.count("sweep ") == 1, stderr
    # Resumed from its checkpoint before the held step, the dead job would hold there again.
    command = [a for a in shlex.split(died.group(1)) if "callbacks.pause" not in a]
    resumed = rerun(tmp_path, shlex.join(command))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for run in run_dirs(tmp_path):
        assert CheckpointStore(run / "checkpoints").latest_step() == TOTAL_STEPS


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(
            lambda pid: pid if list(Path.cwd().glob("multirun/*")) else None,
            id="the sweep's process as its directory appears",
        ),
        pytest.param(
            lambda pid: next(iter(workers(pid)), None), id="a worker as soon as it exists"
        ),
    ],
)
def test_sigterm_whenever_it_comes_stops_the_sweep_in_one_line_and_its_command_resumes(
    target, tmp_path, monkeypatch
):
    """Before the jobs' loops (each job's own handlers) and before a worker's handlers: the
    sweep ends as after any SIGTERM, each job checkpointed where it was, if it had started."""
    monkeypatch.chdir(tmp_path)
    found: list[int] = []

    def ready(pid: int) -> bool:
        found.extend(filter(None, [target(pid)]))
        return bool(found)

    sweep, stderr = start_and_stop(
        tmp_path, ["seed=0,1"], lambda pid: os.kill(found[0], signal.SIGTERM), ready, UNHELD
    )
    assert sweep.returncode == 0, stderr
    assert "Traceback" not in stderr
    stopped = SWEEP_STOPPED.fullmatch(stderr.splitlines()[-1])
    assert stopped and stopped.group(1) == "SIGTERM", stderr
    resumed = rerun(tmp_path, stopped.group(3))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(run_dirs(tmp_path)) == 2
    for run in run_dirs(tmp_path):
        assert CheckpointStore(run / "checkpoints").latest_step() == TOTAL_STEPS
