"""benchmarks/replay_memory.py as docs/benchmarks.md runs it, on a small memory: `--parts`
prints a figure for every timed part of `sample+update` and for the rest, and
`--samplers-alone` a row for every sampler kind."""

from benchmark_runs import run_benchmark
from replay_memory import PARTS


def test_parts_has_a_figure_per_part() -> None:
    done = run_benchmark(
        "replay_memory.py", "--capacity=1000", "--kinds", "proportional", "--steps=0", "--parts"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[3].split(" | ")[0] == "| proportional"
    assert len(lines[3].split(" | ")) == 6  # no step column with --steps 0
    parts = [line.rsplit(maxsplit=2) for line in lines[4:]]
    assert [name.strip() for name, _, _ in parts] == [name for name, _, _ in PARTS] + ["the rest"]
    assert all(unit == "µs" for _, _, unit in parts)


def test_samplers_alone_has_a_row_per_kind() -> None:
    done = run_benchmark(
        "replay_memory.py", "--samplers-alone", "--capacity=2000", "--repeats=1", "--batches=20"
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split(" | ")[0] for line in done.stdout.splitlines()[3:]]
    assert rows == ["| uniform", "| proportional", "| rank_based"]
