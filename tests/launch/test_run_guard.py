"""train.py's guards: torch's thread count, directory arguments checked before Hydra, and the
memory a run's replay needs against every limit the process is under."""

import re
import resource
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from artifacts.command_line import available_memory
from launch.run_guard import RunDirectoryError, check_command_line, check_memory, torch_threads
from launch.validation import validate_config

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")


def test_threads_auto_follows_omp_num_threads_within_the_cores_else_the_cores(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(4)))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert torch_threads("auto") == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "16")  # as threads=16 would be refused here
    assert torch_threads("auto") == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    assert torch_threads("auto") == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(2)))
    assert torch_threads("auto") == 2
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(64)))
    assert torch_threads("auto") == 8
    assert torch_threads(5) == 5


def test_directory_arguments_that_cannot_be_used_are_refused(tmp_path):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(RunDirectoryError, match=r"is a file, not a directory$"):
        check_command_line([f"hydra.run.dir={tmp_path}/a_file"])
    with pytest.raises(RunDirectoryError, match=r"so .* cannot be created$"):
        check_command_line([f"resume={tmp_path}/a_file/run"])
    check_command_line([f"hydra.run.dir={tmp_path}/new/run"])  # creatable: fine
    check_command_line(["--help", f"hydra.run.dir={tmp_path}/a_file"])  # Hydra writes nothing


def test_a_resumed_run_keeps_the_thread_count_it_ran_with(monkeypatch):
    """`auto` resumes with the checkpoint's count (a bit-identical resume needs it, whatever
    the machine); a number given on the command line wins. Checkpoints from before the record
    ran `auto` as half the cores."""
    from artifacts.upgrade import upgrade_checkpoint_state
    from training.run_state import threads_run_with

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert torch_threads("auto", resumed_with=2) == 2
    assert torch_threads(5, resumed_with=2) == 5
    assert threads_run_with(None) is None
    assert threads_run_with({"state": {"torch_threads": 4}}) == 4
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(6)))
    older = upgrade_checkpoint_state({"replay": {}}, identity={})
    assert threads_run_with({"state": older}) == 3
    assert torch_threads("auto", threads_run_with(None)) == 6


def config(*overrides: str):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_a_replay_beyond_what_ulimit_v_leaves_is_refused_naming_that_limit():
    """This process's own address-space limit, 0.5 GB above what it has mapped: a 0.7 GB
    replay would fail to allocate, with a traceback, where the machine has memory enough."""
    run = validate_config(config("experiment=demo", "replay.capacity=100000"))
    mapped = int(Path("/proc/self/status").read_text().split("VmSize:")[1].split()[0]) * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped + 500 * 10**6
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        with pytest.raises(ValueError) as error:
            check_memory(run)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert re.fullmatch(
        r"replay\.capacity=100000 is not allowed: a full replay needs 0\.7 GB and this machine "
        r"has 0\.[45] GB available under this process's address-space limit \(ulimit -v: "
        rf"{limit / 1e9:.1f} GB\)",
        str(error.value),
    )


def fake_system(root: Path, cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A /proc (this process in `cgroup`, 100 GB available) and a /sys/fs/cgroup holding
    `files`: what the kernel shows a process in a memory cgroup."""
    proc, cgroups = root / "proc", root / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: 200000000 kB\nMemAvailable: 100000000 kB\n")
    (proc / "self" / "cgroup").write_text(cgroup)
    for name, text in files.items():
        (cgroups / name).parent.mkdir(parents=True, exist_ok=True)
        (cgroups / name).write_text(text)
    return proc, cgroups


def test_the_memory_cgroup_a_process_lies_in_limits_its_memory(tmp_path):
    """cgroup v2, as SLURM's --mem=1200M sets it on a job: the job's limit applies to its
    step, which has none of its own; what the job uses counts against it, but not the page
    cache it can reclaim."""
    job = "system.slice/slurmstepd.scope/job_7"
    proc, cgroups = fake_system(
        tmp_path,
        f"0::/{job}/step_0\n",
        {
            f"{job}/memory.max": "1200000000\n",
            f"{job}/memory.current": "1000000000\n",
            f"{job}/memory.stat": "anon 700000000\ninactive_file 300000000\n",
            f"{job}/step_0/memory.max": "max\n",
            f"{job}/step_0/memory.current": "900000000\n",
            f"{job}/step_0/memory.stat": "anon 700000000\ninactive_file 200000000\n",
        },
    )
    assert available_memory(proc, cgroups) == (
        500_000_000,
        f" under this process's memory cgroup limit (1.2 GB: {cgroups / job}/memory.max)",
    )


def test_a_containers_memory_limit_applies_where_its_cgroup_is_the_mount(tmp_path):
    """cgroup v1 in a container without a cgroup namespace: the path /proc names is the
    host's, and the container's own cgroup is mounted at the hierarchy's root."""
    proc, cgroups = fake_system(
        tmp_path,
        "5:cpu,cpuacct:/docker/0f3a\n4:memory:/docker/0f3a\n0::/docker/0f3a\n",
        {
            "memory/memory.limit_in_bytes": "2000000000\n",
            "memory/memory.usage_in_bytes": "1500000000\n",
            "memory/memory.stat": "cache 100000000\ntotal_inactive_file 0\n",
        },
    )
    assert available_memory(proc, cgroups) == (
        500_000_000,
        f" under this process's memory cgroup limit (2.0 GB: {cgroups}/memory/"
        "memory.limit_in_bytes)",
    )


def test_without_a_limit_the_machines_available_memory_applies(tmp_path):
    proc, cgroups = fake_system(tmp_path, "0::/user.slice\n", {"user.slice/memory.max": "max\n"})
    assert available_memory(proc, cgroups) == (100_000_000 * 1024, "")
