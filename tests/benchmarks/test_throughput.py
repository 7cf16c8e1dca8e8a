"""benchmarks/throughput.py as a user runs it, on a CPU with a small memory: both passes (the
configured network and the trivial one) finish, and every timed component has its figure."""

import json
from types import SimpleNamespace

import pytest
from benchmark_runs import run_benchmark
from throughput import COMPONENTS, check_window


def test_both_passes_give_every_components_figure(tmp_path) -> None:
    figures = tmp_path / "figures.json"
    done = run_benchmark(
        "throughput.py",
        "replay=proportional",
        "agent.device=cpu",
        "replay.capacity=3000",
        "threads=1",
        "train.learning_start_steps=32",
        "--warmup=8",
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


@pytest.mark.parametrize(
    "steps, warmup, error",
    [
        (20, -1, "--warmup -1: allowed is 0 or more"),
        (3500, 500, "the window (steps 1,501 to 5,000) must end before train.total_steps=5,000"),
        (20, 1490, "a periodic test (every 2,500 steps) falls in the window"),
    ],
)
def test_a_window_outside_the_learning_phase_is_refused(steps, warmup, error) -> None:
    cfg = SimpleNamespace(
        train=SimpleNamespace(learning_start_steps=1000, total_steps=5000),
        evaluation=SimpleNamespace(every_frames=10_000),
        env=SimpleNamespace(frame_skip=4),
    )
    with pytest.raises(ValueError) as refusal:
        check_window(cfg, SimpleNamespace(steps=steps, warmup=warmup))
    assert str(refusal.value) == error
    check_window(cfg, SimpleNamespace(steps=20, warmup=0))
