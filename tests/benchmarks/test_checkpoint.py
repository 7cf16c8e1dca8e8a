"""benchmarks/checkpoint.py as a user runs it, on a small memory: three saves and a resume,
each with and without the checksums (which it patches into training.checkpoints), every
figure printed, and nothing left in --dir."""

from benchmark_runs import run_benchmark

LINES = [
    "filled 1000 transitions in ",
    "checkpoint 1: ",
    "  checkpoint 1: CRC-32s ",
    "checkpoint 2: ",
    "  checkpoint 2: CRC-32s ",
    "checkpoint 3: ",
    "  checkpoint 3: CRC-32s ",
    "resume from checkpoint 3 (page cache evicted): ",
    "  resume: CRC-32s ",
    "disk used by the two checkpoints: ",
    "peak RSS of the whole process (ru_maxrss): ",
]


def test_saves_and_resume_are_timed_and_their_files_removed(tmp_path) -> None:
    done = run_benchmark("checkpoint.py", "--capacity=1000", "--more=100", f"--dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(LINES), done.stdout
    assert all(line.startswith(start) for line, start in zip(lines, LINES, strict=True))
    assert list(tmp_path.iterdir()) == []
