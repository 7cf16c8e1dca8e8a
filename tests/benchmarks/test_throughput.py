"""benchmarks/throughput.py as a user runs it, on a CPU with a small memory: both passes (the
configured network and the trivial one) finish, and every timed component has its figure."""

import json

from benchmark_runs import run_benchmark
from throughput import COMPONENTS


def test_both_passes_give_every_components_figure(tmp_path) -> None:
    figures = tmp_path / "figures.json"
    done = run_benchmark(
        "throughput.py",
        "replay=proportional",
        "agent.device=cpu",
        "replay.capacity=3000",
        "threads=1",
        "--steps=20",
        "--eval-frames=400",
        f"--json={figures}",
    )
    assert done.returncode == 0, done.stderr
    passes = json.loads(figures.read_text())["passes"]
    assert list(passes) == ["nature", "trivial network"]
    for figures_of_pass in passes.values():
        assert figures_of_pass["steps_per_second"] > 0
        assert {row for row, _, _ in COMPONENTS} <= set(figures_of_pass["us_per_step"])
