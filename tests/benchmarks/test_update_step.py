"""benchmarks/update_step.py as a user runs it: the table has a row per variant (and so have
the acting table with --acting and the rates with --flops, whose count is the network's by
hand), and a malformed --option, or too few rounds or calls for a figure, is refused in one
line."""

import subprocess

import pytest
from benchmark_runs import run_benchmark


def run(*arguments: str) -> subprocess.CompletedProcess:
    return run_benchmark("update_step.py", *arguments)


def test_one_row_per_variant() -> None:
    done = run(
        "experiment=minatar_dqn",
        "threads=1",
        "--rounds=2",
        "--calls=1",
        "--warmup=1",
        "--option=cpp_wrapper=false",
        "--norms",
    )
    assert done.returncode == 0, done.stderr
    rows = [
        line.split("|")[1].strip() for line in done.stdout.splitlines() if line.startswith("| ")
    ]
    assert rows == [
        "variant",
        "---",
        "eager",
        "compiled",
        "compiled, cpp_wrapper=false",
        "eager, parameter-change norms",
    ]


def test_the_acting_table_has_a_row_per_variant() -> None:
    done = run(
        "experiment=minatar_dqn", "threads=1", "--rounds=2", "--calls=1", "--warmup=1", "--acting"
    )
    assert done.returncode == 0, done.stderr
    acting = done.stdout.split("\n\n")[-1].strip().splitlines()
    assert [line.split("|")[1].strip() for line in acting] == [
        "variant, µs per action",
        "---",
        "eager",
        "compiled",
    ]
    columns = [column.strip() for column in acting[0].split("|")[2:5]]
    assert columns == ["after an update", "a second action", "actions alone"]


def test_flops_counts_the_minatar_update_by_hand() -> None:
    """MinAtar Breakout, batch 32, DQN targets: a forward pass is the 3x3 convolution as a
    product (32·64 patches of 36 values times 16 filters), the hidden layer (1024 -> 128) and
    the output (128 -> 6), 2·32·(64·36·16 + 1024·128 + 128·6) = 10,797,056 FLOP; the update
    runs two (online on S, target on S') and, backward, each layer's weight gradient and the
    two linear layers' input gradients: 21,594,112 + 10,797,056 + 2·32·(1024·128 + 128·6)
    = 40,828,928."""
    done = run(
        "experiment=minatar_dqn", "threads=1", "--rounds=2", "--calls=1", "--warmup=1", "--flops"
    )
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("\n\n")
    assert section[-2].startswith("matrix products and convolutions: 40.8 MFLOP per update, ")
    rows = [line.split("|")[1].strip() for line in section[-1].strip().splitlines()]
    assert rows == ["variant", "---", "eager", "compiled"]


@pytest.mark.parametrize(
    "argument, error",
    [
        ("--option=cpp_wrapper", "--option cpp_wrapper: allowed is KEY=VALUE, an Inductor option"),
        ("--rounds=1", "--rounds 1: allowed is 2 or more (for the quartiles)"),
        ("--calls=0", "--calls 0: allowed is 1 or more"),
    ],
)
def test_bad_argument_is_refused_before_any_update(argument: str, error: str) -> None:
    done = run("experiment=minatar_dqn", argument)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {error}"]
