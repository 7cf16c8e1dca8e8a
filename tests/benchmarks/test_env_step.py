"""benchmarks/env_step.py as a user runs it, with few steps: a row per env and for the
emulator alone, a ratio per round, and a figure for each operation of the lean env's
processing (read from the lean env's own buffers)."""

from benchmark_runs import run_benchmark


def test_every_env_round_and_operation_has_its_figure() -> None:
    done = run_benchmark("env_step.py", "--steps=10", "--rounds=2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == "pong, 2 rounds x 10 steps, µs per step (4 frames)"
    assert [line.split(" median ")[0].strip() for line in lines[2:5]] == [
        "make_env",
        "lean",
        "emulator only",
    ]
    assert lines[5].startswith("  lean / make_env per round: median ")
    assert len(lines[5].split("(")[1].split(",")) == 2
    assert lines[6] == "the lean env's processing, µs per step:"
    operations = lines[7:-1]
    assert len(operations) == 4
    assert all(float(line.split()[-1]) > 0 for line in operations)
    assert lines[-1].startswith("load average after: ")
