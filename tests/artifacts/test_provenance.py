"""A run's provenance (`artifacts.provenance`): the commit and dirty flag of a git checkout,
nothing guessed elsewhere; the libraries' versions; how a report names the code of a run."""

import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from artifacts.provenance import Provenance, code_of, code_state, this_start

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(root: Path, *arguments: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "project"
    (root / "training").mkdir(parents=True)
    (root / "training" / "loop.py").write_text("STEP = 1\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


@needs_git
def test_a_checkout_gives_its_commit_and_whether_tracked_files_differ(checkout):
    commit = git(checkout, "rev-parse", "HEAD")
    assert code_state(checkout) == (commit, False)
    (checkout / "notes.txt").write_text("untracked files are not the code\n")
    assert code_state(checkout) == (commit, False)
    (checkout / "training" / "loop.py").write_text("STEP = 2\n")
    assert code_state(checkout) == (commit, True)


@needs_git
def test_no_commit_is_guessed_outside_the_top_of_a_checkout(checkout, tmp_path):
    # A copy installed inside some other repository is not that repository's commit.
    assert code_state(checkout / "training") == (None, None)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert code_state(plain) == (None, None)


@needs_git
def test_a_start_records_its_step_the_code_and_the_libraries(checkout):
    start = this_start(300, checkout)
    assert start["step"] == 300
    assert (start["commit"], start["dirty"]) == (git(checkout, "rev-parse", "HEAD"), False)
    assert start["python"] == platform.python_version()
    assert start["numpy"] == metadata.version("numpy")
    assert start["torch"] == metadata.version("torch")
    assert list(start) == [
        "step",
        "time",
        "commit",
        "dirty",
        "python",
        "torch",
        "numpy",
        "ale-py",
        "minatar",
    ]


def start(step: int, commit: str | None, dirty: bool | None = False, **versions) -> dict:
    return {"step": step, "commit": commit, "dirty": dirty, **versions}


def test_a_report_names_the_commits_of_a_run_in_order_and_what_is_unknown():
    first, second = "84135fbdded95fec19458f5ef325911020e29640", "cd56e5e1" + "0" * 32
    assert Provenance(()).code == "unknown"  # a run from before runs recorded this
    assert Provenance((start(0, first),)).code == "84135fb"
    assert Provenance((start(0, first), start(100, first))).code == "84135fb"
    resumed = Provenance((start(0, first, True), start(100, second)))
    assert resumed.code == "84135fb-dirty, cd56e5e"
    # Resumed by recording code after a start that recorded nothing: its beginning is unknown.
    assert Provenance((start(100, first),)).code == "unknown, 84135fb"
    assert Provenance((start(0, None, None),)).code == "unknown"  # not a git checkout
    assert code_of([resumed, Provenance(()), resumed]) == "84135fb-dirty, cd56e5e; unknown"


def test_the_libraries_are_named_once_per_distinct_set():
    versions = {"python": "3.11.7", "torch": "2.13.0", "numpy": "2.4.6", "minatar": None}
    same = Provenance((start(0, "a", **versions), start(50, "b", **versions)))
    assert same.libraries == "python 3.11.7, torch 2.13.0, numpy 2.4.6"
    newer = Provenance(
        (start(0, "a", **versions), start(50, "a", **{**versions, "minatar": "1.0.15"}))
    )
    assert newer.libraries == (
        "python 3.11.7, torch 2.13.0, numpy 2.4.6; python 3.11.7, torch 2.13.0, numpy 2.4.6, "
        "minatar 1.0.15"
    )
    assert Provenance(()).libraries == "unknown"
