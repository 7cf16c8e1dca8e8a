"""`python -m cliffwalk`: the csv, summary and figures it writes; --replot."""

import math
from dataclasses import replace

import pytest

from cliffwalk import __main__ as cliffwalk_main
from cliffwalk.__main__ import COMPARISONS, main
from cliffwalk.experiment import PAPER, RunResult, paired_table, read_results, run_one
from cliffwalk.plots import markdown_table, summarize


def test_cli_writes_csv_summary_and_figures(tmp_path):
    main(["--max-n", "4", "--seeds", "2", "--jobs", "2", "--out", str(tmp_path)])
    results = read_results(tmp_path / "cliffwalk.csv")
    assert len(results) == 7 * 3 * 2  # default variants × n ∈ {2, 3, 4} × seeds
    assert {r.transitions for r in results} == {6, 14, 30}
    for name in ("figure1.png", "figure2.png"):
        png = (tmp_path / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) < 200_000
    summary = (tmp_path / "cliffwalk_summary.md").read_text()
    assert "| 4 | 30 |" in summary and "greedy TD-error" in summary
    (tmp_path / "figure1.png").unlink()
    main(["--replot", "--out", str(tmp_path)])
    assert (tmp_path / "figure1.png").exists()


def result(strategy: str, seed: int, updates: int, status: str = "converged") -> RunResult:
    return RunResult("linear", strategy, 5, 62, seed, updates, status, 0.0, 0.5, 0, 0.1)


def test_failed_runs_count_as_never_converging():
    results = [
        result("oracle", 0, 10),
        result("oracle", 1, 30, "stalled"),
        result("oracle", 2, 20),
        result("uniform", 0, 5, "capped"),
    ]
    oracle, uniform = summarize(results)
    assert (oracle.median, oracle.minimum, oracle.maximum) == (20, 10, math.inf)
    assert (oracle.stalled, oracle.capped, uniform.capped) == (1, 0, 1)
    assert math.isinf(uniform.median)
    table = markdown_table([oracle, uniform], "linear", ["uniform", "oracle"])
    assert "| 5 | 62 | ∞ [∞–∞] (1/1 capped) | 20 [10–∞] (1/3 stalled) |" in table


def test_unknown_variant_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="unknown variant 'linear/sorted'"):
        main(["--variants", "linear/sorted", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (["--max-n", "0"], "error: argument --max-n: 0 is not allowed: must be >= 2"),
        (["--seeds", "-1"], "error: argument --seeds: -1 is not allowed: must be >= 1"),
        (
            ["--min-n", "5", "--max-n", "3"],
            "error: --max-n 3 is not allowed: must be >= --min-n (5)",
        ),
        (
            ["--priority-epsilon", "0"],
            "error: argument --priority-epsilon: 0 is not allowed: must be > 0.0",
        ),
        (
            ["--out", "{tmp}/a_file/out"],
            "error: argument --out: {tmp}/a_file/out cannot be used: {tmp}/a_file is a file, "
            "so {tmp}/a_file/out cannot be created",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_write_nothing(tmp_path, capsys, arguments, line):
    (tmp_path / "a_file").write_text("not a directory\n")
    arguments = [a.format(tmp=tmp_path) for a in arguments]
    with pytest.raises(SystemExit) as stop:
        main(
            [*arguments, "--out", str(tmp_path / "out")] if "--out" not in arguments else arguments
        )
    assert stop.value.code == 2
    assert capsys.readouterr().err == line.format(tmp=tmp_path) + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


@pytest.mark.parametrize(
    ("comparison", "arguments", "variants", "figures"),
    [
        (
            "signals",
            ["--max-n", "3"],
            2 * 8,  # uniform, oracle and 3 signals × 2 samplers, per representation
            [
                f"signals_{r}_{s}.png"
                for r in ("tabular", "linear")
                for s in ("proportional", "rank_based")
            ],
        ),
        (
            "streaming",
            ["--min-n", "3", "--max-n", "4"],
            2 * 4,  # uniform and proportional × FIFO and lowest priority, per representation
            ["streaming_tabular.png", "streaming_linear.png"],
        ),
    ],
)
def test_cli_comparisons_write_their_own_csv_summary_and_figures(
    tmp_path, comparison, arguments, variants, figures
):
    main(
        ["--compare", comparison, *arguments, "--seeds", "1", "--jobs", "1", "--out", str(tmp_path)]
    )
    results = read_results(tmp_path / f"{comparison}.csv", COMPARISONS[comparison].result)
    assert len(results) == variants * 2  # × two values of n
    for name in figures:
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    summary = (tmp_path / f"{comparison}_summary.md").read_text()
    assert "between replays" in summary or "forget lowest \\|δ\\|" in summary
    assert not (tmp_path / "cliffwalk.csv").exists()
    (tmp_path / figures[0]).unlink()
    main(["--compare", comparison, "--replot", "--out", str(tmp_path)])
    assert (tmp_path / figures[0]).exists()


def test_paired_table_compares_runs_of_one_seed():
    results = [
        result("uniform", 0, 100),
        result("oracle", 0, 50),
        result("uniform", 1, 80),
        result("oracle", 1, 80),
        result("uniform", 2, 60),
        result("oracle", 2, 120),
        result("uniform", 3, 10, "capped"),
        result("oracle", 3, 40),
    ]
    table = paired_table(results, "Oracle", {"oracle vs uniform": ("uniform", "oracle")})
    # Oracle fewer in seeds 0 and 3 (a capped run counts as ∞), as many in seed 1; ratios
    # 2, 1, 0.5, ∞ have the median 1.5.
    assert "| linear | 5 | 2/4 (1 equal), 1.50× |" in table


@pytest.mark.parametrize(
    ("max_n", "needed"),
    [("30", "1.29e+03"), ("200", "1.93e+54")],  # 2 runs × 300 bytes × (2^(n+1) − 2)
)
def test_a_grid_beyond_the_memory_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch, max_n, needed
):
    monkeypatch.setattr(cliffwalk_main, "available_memory", lambda: (16 * 10**9, ""))
    with pytest.raises(SystemExit) as stop:
        main(["--max-n", max_n, "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        f"error: --max-n {max_n} is not allowed here: 2 run(s) at once of 2^{int(max_n) + 1} - 2 "
        f"transitions need about {needed} GB and this machine has 16 GB available (lower "
        "--max-n or --jobs)\n"
    )
    assert list(tmp_path.iterdir()) == []


def fails_below_n_4(variant, n, seed, settings):
    if n < 4:
        raise MemoryError("cannot allocate")
    return run_one(variant, n, seed, settings)


def test_a_grid_that_fails_part_way_keeps_the_runs_it_finished(tmp_path, capsys, monkeypatch):
    """The largest memories run first, one at a time here: those of n = 4 are finished when
    the first of n = 3 fails."""
    monkeypatch.setattr(cliffwalk_main, "PAPER", replace(PAPER, run=fails_below_n_4))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main(["--min-n", "3", "--max-n", "4", "--seeds", "1", "--jobs", "1", "--out", str(out)])
    assert stop.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: the grid failed (MemoryError('cannot allocate')); the 7 run(s) finished are in "
        f"{out / 'cliffwalk.csv'}"
    )
    assert {(r.n, r.seed) for r in read_results(out / "cliffwalk.csv")} == {(4, 0)}
    assert len(read_results(out / "cliffwalk.csv")) == 7
