"""Sweeps through `hydra/launcher=slurm` on a real single-node SLURM cluster with accounting
(scripts/slurm_cluster.sh up; SLURM_CONF names its config): a two-job sweep runs each job to
the end in its own run directory; a job preempted with submitit's signal, then requeued by
SLURM, checkpoints each time, is requeued and ends exactly as the uninterrupted run; a job
killed with scancel ends the sweep, within SWEEP_SECONDS, with one line naming it while the
other job's results are kept.

Run with `python -m pytest -m slurm tests/integration` (1½ to 2 minutes on 2 busy cores);
`.ci/run` does, after the unit tests."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.training.test_resume import assert_same_run
from training.checkpoints import CheckpointStore

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
PARTITION = "debug"  # scripts/slurm_cluster.sh's
# A run of 600 steps with a checkpoint every 100, long enough to be signalled mid-run, and a
# periodic test every 100 in its worker process (which SLURM signals too).
RUN = {
    "experiment": "demo",
    "env.game": "breakout",
    "agent.device": "cpu",
    "threads": 1,
    "train.total_steps": 600,
    "train.batch_size": 8,
    "train.learning_start_steps": 40,
    "train.target_update_period_steps": 50,
    "train.log_period_steps": 25,
    "replay.capacity": 120,
    "env.max_episode_frames": 400,
    "checkpoint.every_steps": 100,
    "evaluation.every_frames": 400,
    "evaluation.frames": 200,
}
# What the sweeps need of the node: their two jobs at once (each waits for the other's first
# checkpoint), each with one CPU and 1 GB.
JOBS_AT_ONCE, CPUS_PER_JOB, MEMORY_MB_PER_JOB = 2, 1, 1024
# The preset, with what this one-node cluster lacks (a GPU, 6 cores, 32 GB) scaled down, and a
# time limit past 10 minutes (at 10 or less, submitit takes its signal for a timeout).
LAUNCHER = [
    "hydra/launcher=slurm",
    f"hydra.launcher.partition={PARTITION}",
    "hydra.launcher.timeout_min=15",
    "hydra.launcher.gpus_per_node=null",
    f"hydra.launcher.cpus_per_task={CPUS_PER_JOB}",
    f"hydra.launcher.mem_gb={MEMORY_MB_PER_JOB // 1024}",
]
ENVIRONMENT = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
SWEEP_SECONDS = 480  # a sweep that takes longer has hung


def slurm(*command: str) -> str:
    return subprocess.run(
        command, env=ENVIRONMENT, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def node_shortfall(cpus: int, memory_mb: int) -> str | None:
    """What a node of `cpus` CPUs and `memory_mb` MB lacks for these tests, or None."""
    needed = {"CPU(s)": JOBS_AT_ONCE * CPUS_PER_JOB, "MB": JOBS_AT_ONCE * MEMORY_MB_PER_JOB}
    lacking = [
        f"{has} {unit} of the {need} needed"
        for (unit, need), has in zip(needed.items(), (cpus, memory_mb), strict=True)
        if has < need
    ]
    if not lacking:
        return None
    return (
        f"the cluster's node has {' and '.join(lacking)} to run {JOBS_AT_ONCE} jobs at once: "
        "scripts/slurm_cluster.sh down, then up (it sizes the node from the machine)"
    )


@pytest.fixture(scope="module", autouse=True)
def cluster():
    try:
        node = slurm(
            "sinfo", "--noheader", "--responding", f"--partition={PARTITION}", "-o", "%c %m"
        )
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.fail(
            f"no SLURM cluster ({error}): as root, scripts/slurm_cluster.sh up, then export "
            "SLURM_CONF=/var/lib/per-atari-slurm/slurm.conf"
        )
    if not node.strip():
        pytest.fail(f"the cluster has no responding node in partition {PARTITION}", pytrace=False)
    cpus, memory_mb = (int(field.rstrip("+")) for field in node.split()[:2])
    shortfall = node_shortfall(cpus, memory_mb)
    if shortfall is not None:
        pytest.fail(shortfall, pytrace=False)


def start_sweep(cwd: Path, sweep_dir: Path, *overrides: str) -> subprocess.Popen:
    """`python train.py -m` through the SLURM preset, from `cwd`; its output goes to
    <sweep_dir>.out and <sweep_dir>.err."""
    cwd.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        "-m",
        *LAUNCHER,
        *[f"{key}={value}" for key, value in RUN.items()],
        *overrides,
        f"hydra.sweep.dir={sweep_dir}",
        # Directory names show what the sweep varies: seed=0, seed=1.
        f"hydra.job.config.override_dirname.exclude_keys=[{','.join(RUN)}]",
    ]
    with open(f"{sweep_dir}.out", "w") as out, open(f"{sweep_dir}.err", "w") as err:
        return subprocess.Popen(command, cwd=cwd, env=ENVIRONMENT, stdout=out, stderr=err)


def finish(sweep: subprocess.Popen, sweep_dir: Path) -> tuple[int, str]:
    """The sweep's exit status and stderr; its SLURM jobs are cancelled if it hangs."""
    try:
        sweep.wait(timeout=SWEEP_SECONDS)
    except subprocess.TimeoutExpired:
        sweep.kill()
        for job in slurm_jobs(sweep_dir):
            subprocess.run(["scancel", job], env=ENVIRONMENT, check=False)
        pytest.fail(f"the sweep did not end in {SWEEP_SECONDS} s: {Path(f'{sweep_dir}.err')}")
    return sweep.returncode, Path(f"{sweep_dir}.err").read_text()


def slurm_jobs(sweep_dir: Path) -> list[str]:
    """The SLURM ids of the sweep's jobs (array tasks `<array>_<job number>`), by number."""
    names = [p.name for p in (sweep_dir / ".submitit").iterdir()]
    tasks = [name for name in names if re.fullmatch(r"\d+_\d+", name)]
    return sorted(tasks, key=lambda name: int(name.split("_")[1]))


def wait_for(condition, what: str, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.2)


def checkpoint_steps(run_dir: Path) -> list[int]:
    """The steps of the run's checkpoints (from their file names: nothing is read)."""
    if not (run_dir / "checkpoints").is_dir():
        return []
    files = CheckpointStore(run_dir / "checkpoints").state_files()
    return [int(re.match(r"state-(\d+)-", path.name).group(1)) for path in files]


def requeued_now(job: str) -> None:
    """Wait for a requeued job to be pending, then let it start: SLURM holds it for about
    120 s first (AuthInfo's cred_expire), which an admin may cut short as here."""

    def pending() -> bool:
        return "PENDING" in slurm("squeue", "--noheader", "-o", "%T", "-j", job)

    wait_for(pending, f"{job} to be requeued")
    slurm("scontrol", "update", f"JobId={job}", "StartTime=now")


def states(job: str) -> list[str]:
    """The job's states in SLURM's accounting, one per run of it (a requeue starts another)."""
    lines = slurm(
        "sacct", "--duplicates", "--noheader", "--parsable2", "-o", "JobID,State", "-j", job
    )
    found = (line.split("|") for line in lines.splitlines())
    return [state for job_id, state in found if job_id == job]


def assert_accounted(jobs: list[str], expected: list[list[str]]) -> None:
    """SLURM's accounting reaches the expected states of `jobs`: a job's end is recorded a
    moment after its result is written (and the sweep ends)."""
    wait_for(lambda: [states(job) for job in jobs] == expected, f"{jobs} to be {expected}", 60)


@pytest.fixture(scope="module")
def completed_sweep(tmp_path_factory) -> tuple[Path, Path, int, str]:
    """seed=0,1 run to the end: (working directory, sweep directory, status, stderr)."""
    base = tmp_path_factory.mktemp("completed")
    cwd, sweep_dir = base / "cwd", base / "sweep"
    status, stderr = finish(start_sweep(cwd, sweep_dir, "seed=0,1"), sweep_dir)
    return cwd, sweep_dir, status, stderr


@pytest.fixture(scope="module")
def interrupted_sweep(tmp_path_factory) -> dict:
    """seed=0,1 after each job's first checkpoint: job 0 preempted with submitit's signal
    (USR2), then, after its next checkpoint, requeued by SLURM (`scontrol requeue`, as when
    the cluster preempts it); job 1 cancelled (`scancel`)."""
    base = tmp_path_factory.mktemp("interrupted")
    sweep_dir = base / "sweep"
    sweep = start_sweep(base / "cwd", sweep_dir, "seed=0,1")
    runs = [sweep_dir / f"seed={seed}" for seed in (0, 1)]
    wait_for(lambda: all(checkpoint_steps(run) for run in runs), "the first checkpoints")
    preempted, cancelled = slurm_jobs(sweep_dir)
    slurm("scancel", "--signal=USR2", preempted)
    slurm("scancel", cancelled)
    requeued_now(preempted)
    stopped_at = max(checkpoint_steps(runs[0]))
    wait_for(lambda: max(checkpoint_steps(runs[0])) > stopped_at, "a checkpoint after the resume")
    slurm("scontrol", "requeue", preempted)
    requeued_now(preempted)
    status, stderr = finish(sweep, sweep_dir)
    return dict(
        sweep_dir=sweep_dir, status=status, stderr=stderr, preempted=preempted, cancelled=cancelled
    )


def test_a_two_job_sweep_runs_each_job_to_the_end_in_its_own_run_directory(completed_sweep):
    cwd, sweep_dir, status, stderr = completed_sweep
    assert status == 0, stderr[-3000:]
    assert sorted(p.name for p in sweep_dir.iterdir()) == [
        ".submitit",
        "multirun.yaml",
        "seed=0",
        "seed=1",
    ]
    for seed in (0, 1):
        run_dir = sweep_dir / f"seed={seed}"
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["seed"] == seed
        assert (run_dir / "agent_final.pt").is_file()
        assert CheckpointStore(run_dir / "checkpoints").read_latest()["step"] == 600
    # The jobs wrote nowhere else: not into the directory the sweep was started from.
    assert list(cwd.iterdir()) == []
    # What submitit asks SLURM when a job leaves no result.
    assert_accounted(slurm_jobs(sweep_dir), [["COMPLETED"], ["COMPLETED"]])


def test_a_preempted_job_checkpoints_is_requeued_and_ends_as_the_uninterrupted_run(
    completed_sweep, interrupted_sweep
):
    sweep_dir, job = interrupted_sweep["sweep_dir"], interrupted_sweep["preempted"]
    log = (sweep_dir / ".submitit" / job / f"{job}_0_log.err").read_text()
    assert "this job is preempted" in log  # not timed out: no requeue is counted against it
    stops = [int(step) for step in re.findall(r"stopped by SIGTERM at step (\d+);", log)]
    assert len(stops) == 2 and 100 <= stops[0] < stops[1] < 600, log
    assert "evaluation worker died" not in log
    assert_accounted([job], [["REQUEUED", "REQUEUED", "COMPLETED"]])
    assert_same_run(sweep_dir / "seed=0", completed_sweep[1] / "seed=0")


def test_a_cancelled_job_ends_the_sweep_naming_it_and_the_other_jobs_results_stay(
    interrupted_sweep,
):
    sweep_dir, job = interrupted_sweep["sweep_dir"], interrupted_sweep["cancelled"]
    assert interrupted_sweep["status"] == 1
    last_line = interrupted_sweep["stderr"].splitlines()[-1]
    log = sweep_dir / ".submitit" / job / f"{job}_0_log.err"
    assert re.fullmatch(
        rf"error: job 1 \(seed=1\), SLURM job {job}, ended CANCELLED by \d+: stopped by "
        rf"SIGTERM at step \d+; resume with: the sweep's command with hydra\.sweep\.dir="
        + re.escape(f"{sweep_dir}; its log: {log}"),
        last_line,
    ), last_line
    assert_accounted([job], [["CANCELLED by 0"]])
    assert not (sweep_dir / "seed=1" / "agent_final.pt").exists()
    assert (sweep_dir / "seed=0" / "agent_final.pt").is_file()
