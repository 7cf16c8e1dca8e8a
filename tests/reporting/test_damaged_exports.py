"""An exported file is read as what export wrote or not at all: a file cut short or damaged is
refused in one line naming it; scores without their run's config.yaml are named in a note; and
an export that fails part-way leaves no file half-written, so that running it again works."""

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reporting.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
EXPORTED = ROOT / "results/breakout/uniform/seed0_10M"  # tested at 10M frames: 16.0


def cut_inside(text: str):
    """A damage: the file cut one character into the last occurrence of `text`."""

    def cut(path: Path) -> None:
        whole = path.read_text()
        path.write_text(whole[: whole.rindex(text) + 1])

    return cut


def edit_line(number: int, edit):
    """A damage: line `number` (1 the header) of the file replaced by `edit(line)`."""

    def spoil(path: Path) -> None:
        lines = path.read_text().splitlines(keepends=True)
        lines[number - 1] = edit(lines[number - 1])
        path.write_text("".join(lines))

    return spoil


@pytest.fixture
def results(tmp_path) -> Path:
    copy = tmp_path / "results/breakout/uniform/seed0_10M"
    shutil.copytree(EXPORTED, copy)
    return copy


# name: (file, how it is damaged, what the refusal says of it)
DAMAGES = {
    # The last test's mean score, 15.95122, read as 1.
    "evaluations.csv cut inside its last mean score": (
        "evaluations.csv",
        cut_inside("15.95122,"),
        "is cut short",
    ),
    "training_returns.csv cut inside a row": (
        "training_returns.csv",
        lambda path: path.write_bytes(path.read_bytes()[:-3]),
        "is cut short",
    ),
    "config.yaml cut inside a value": ("config.yaml", cut_inside("2500000"), "is cut short"),
    "provenance.yaml cut": (
        "provenance.yaml",
        lambda path: path.write_bytes(path.read_bytes()[:-5]),
        "is cut short",
    ),
    "a step that is no number": (
        "evaluations.csv",
        edit_line(2, lambda line: line.replace("0", "o", 1)),
        "line 2",
    ),
    "a row without its last cell": (
        "training_returns.csv",
        edit_line(7, lambda line: line.rsplit(",", 1)[0] + "\n"),
        "line 7",
    ),
    "a score that is no number": (
        "training_returns.csv",
        edit_line(9, lambda line: line.replace("\n", "x\n")),
        "line 9",
    ),
    "another header": (
        "evaluations.csv",
        edit_line(1, lambda line: line.replace("mean_score", "score")),
        "header",
    ),
    "rows out of step order": (
        "evaluations.csv",
        edit_line(3, lambda line: line.replace("500000,", "50000,", 1)),
        "line 3",
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("command", [[], ["published"], ["export"]])
def test_a_damaged_exported_file_is_refused_in_one_line_naming_it(
    results, tmp_path, capsys, damage, command
):
    name, spoil, problem = DAMAGES[damage]
    spoil(results / name)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main([*command, str(results.parents[2]), "--out", str(out)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"error: {results / name} ")
    assert problem in error
    assert not out.exists()


def test_scores_without_a_run_config_are_named_in_a_note(results, tmp_path):
    """An export cut short before its config.yaml (or with an empty one) is no run: it is
    left out, with a note, not dropped without a word."""
    stray = results.parent / "seed1_10M"
    shutil.copytree(results, stray)
    (stray / "config.yaml").unlink()
    empty = results.parent / "seed2_10M"
    shutil.copytree(results, empty)
    (empty / "config.yaml").write_text("")
    for command in ([], ["published"]):
        out = tmp_path / "out" / "-".join(command)
        text = main([*command, str(results.parents[2]), "--out", str(out)]).read_text()
        assert f"- {stray}: scores without a run's config.yaml" in text
        assert f"- {empty}: scores without a run's config.yaml" in text


def test_an_export_without_its_test_scores_is_left_out_with_a_note(results, tmp_path):
    """An export whose evaluations.csv is gone (a removal cut short) beside a whole one."""
    partial = results.parent / "seed1_10M"
    shutil.copytree(results, partial)
    (partial / "evaluations.csv").unlink()
    for command in ([], ["published"]):
        out = tmp_path / "out" / "-".join(command)
        text = main([*command, str(results.parents[2]), "--out", str(out)]).read_text()
        assert f"{partial}: no evaluations.csv (not an exported run), left out" in text


def export_within(file_bytes: int | None, source: Path, out: Path) -> subprocess.CompletedProcess:
    """`python -m reporting export` where no file may grow beyond `file_bytes` (a disk that
    fills up part-way through the export)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write beyond it fails instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

    return subprocess.run(
        [sys.executable, "-m", "reporting", "export", str(source), "--out", str(out)],
        cwd=ROOT,
        preexec_fn=None if file_bytes is None else limit,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def files_below(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("file_bytes", [0, 1_000, 10_000])
def test_an_export_that_fails_part_way_leaves_nothing_half_written(results, tmp_path, file_bytes):
    whole = tmp_path / "whole"
    assert export_within(None, results, whole).returncode == 0
    out = tmp_path / "out"
    failed = export_within(file_bytes, results, out)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    left = files_below(out) if out.exists() else {}
    assert all(left[name] == files_below(whole)[name] for name in left)
    retried = export_within(None, results, out)
    assert retried.returncode == 0, retried.stderr
    assert files_below(out) == files_below(whole)


@pytest.mark.parametrize("command", [[], ["published"]])
def test_a_report_onto_a_full_disk_is_one_line_naming_where_with_none_half_written(
    results, capsys, small_file_system, command
):
    disk = small_file_system(48 << 10)  # room for the markdown, not for every figure
    with pytest.raises(SystemExit) as exit_info:
        main([*command, str(results.parents[2]), "--out", str(disk / "report")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"error: {disk / 'report'}"), error
    assert "No space left on device" in error and "make room" in error
    for written in (disk / "report").iterdir():  # each file whole: no temporary left
        assert not written.name.startswith("."), written
