"""benchmarks/update_step.py as a user runs it: one run with every table (the update's,
--acting's and --flops's, whose count is the network's by hand) has a row per variant, and a
malformed --option, or too few rounds or calls for a figure, is refused in one line."""

import argparse

import pytest
from benchmark_runs import run_benchmark
from update_step import check_args

VARIANTS = ["eager", "compiled", "compiled, cpp_wrapper=false", "eager, parameter-change norms"]


@pytest.fixture(scope="module")
def sections() -> list[str]:
    """The output's blank-line-separated sections, of one run that compiles each variant once."""
    done = run_benchmark(
        "update_step.py",
        "experiment=minatar_dqn",
        "threads=1",
        "--rounds=2",
        "--calls=1",
        "--warmup=1",
        "--option=cpp_wrapper=false",
        "--norms",
        "--acting",
        "--flops",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n\n")


def first_cells(section: str) -> list[str]:
    return [line.split("|")[1].strip() for line in section.strip().splitlines()]


def test_one_row_per_variant(sections) -> None:
    assert first_cells(sections[1]) == ["variant", "---", *VARIANTS]


def test_the_acting_table_has_a_row_per_variant(sections) -> None:
    acting = sections[2].strip().splitlines()
    assert first_cells(sections[2]) == ["variant, µs per action", "---", *VARIANTS]
    columns = [column.strip() for column in acting[0].split("|")[2:5]]
    assert columns == ["after an update", "a second action", "actions alone"]


def test_flops_counts_the_minatar_update_by_hand(sections) -> None:
    """MinAtar Breakout, batch 32, DQN targets: a forward pass is the 3x3 convolution as a
    product (32·64 patches of 36 values times 16 filters), the hidden layer (1024 -> 128) and
    the output (128 -> 6), 2·32·(64·36·16 + 1024·128 + 128·6) = 10,797,056 FLOP; the update
    runs two (online on S, target on S') and, backward, each layer's weight gradient and the
    two linear layers' input gradients: 21,594,112 + 10,797,056 + 2·32·(1024·128 + 128·6)
    = 40,828,928."""
    assert sections[3].startswith("matrix products and convolutions: 40.8 MFLOP per update, ")
    assert first_cells(sections[4]) == ["variant", "---", *VARIANTS]


@pytest.mark.parametrize(
    "given, error",
    [
        (
            {"option": ["cpp_wrapper"]},
            "--option cpp_wrapper: allowed is KEY=VALUE, an Inductor option",
        ),
        ({"rounds": 1}, "--rounds 1: allowed is 2 or more (for the quartiles)"),
        ({"calls": 0}, "--calls 0: allowed is 1 or more"),
    ],
)
def test_bad_argument_is_refused(given: dict, error: str) -> None:
    with pytest.raises(ValueError) as refusal:
        check_args(argparse.Namespace(**{"rounds": 2, "calls": 1, "option": []} | given))
    assert str(refusal.value) == error


def test_a_bad_argument_is_refused_in_one_line_before_any_update() -> None:
    done = run_benchmark("update_step.py", "experiment=minatar_dqn", "--rounds=1")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --rounds 1: allowed is 2 or more (for the quartiles)"
    ]
