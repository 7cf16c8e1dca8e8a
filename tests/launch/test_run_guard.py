"""train.py's guards: torch's thread count, and directory arguments checked before Hydra."""

import pytest

from launch.run_guard import RunDirectoryError, check_command_line, torch_threads


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
