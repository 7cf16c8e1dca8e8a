"""`python -m reporting minatar` on a hand-made results tree whose numbers are worked out by
hand below; its refusal of a directory without MinAtar results."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from reporting.__main__ import main
from reporting.minatar import read_variants
from reporting.minatar_seeds import cells_at, published_dqn
from reporting.results import read_runs

# Episode k (1..200) of a run ends at frame 5000 k − 100: episodes 1..100 by 0.5M frames, the
# last one (999,900) short of 1M. Each run returns A in its first 100 episodes and B after.
# A finished run logged a periodic test at 1M frames, which tells that it trained that far.
# Every run's periodic tests score A at 0.5M frames and B at 1M.
Q = 0.99**100  # running average after 100 episodes of G from 0: G (1 − Q)
RUNS = {  # (game, target rule, replay kind, priority signal): {seed: (A, B, episodes)}
    ("breakout", "dqn", "uniform", "td_error"): {0: (1, 10, 200), 1: (2, 12, 200), 2: (3, 14, 200)},
    ("breakout", "dqn", "proportional", "huber_loss"): {
        0: (2, 4, 200),
        1: (3, 5, 200),
        2: (4, 6, 200),
    },
    ("breakout", "dqn", "rank_based", "td_error"): {0: (7, 8, 200)},
    # Seed 2 is unfinished: 120 episodes (599,900 frames), tested at 0.5M only.
    ("freeway", "dqn", "uniform", "td_error"): {
        0: (20, 20, 200),
        1: (22, 22, 200),
        2: (24, 24, 120),
    },
    ("seaquest", "double_dqn", "uniform", "td_error"): {0: (1, 1, 200)},
}


def write_csv(path: Path, header: str, rows) -> None:
    path.write_text("\n".join([header, *(",".join(map(str, row)) for row in rows)]) + "\n")


def write_export(run_dir: Path, config: dict, returns, test_frames, test_scores=None) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    frames = [5000 * k - 100 for k in range(1, len(returns) + 1)]
    write_csv(
        run_dir / "training_returns.csv",
        "step,frames,return",
        zip(frames, frames, returns, strict=True),
    )
    write_csv(
        run_dir / "evaluations.csv",
        "step,frames,episodes,mean_score,normalized_score,episode_scores",
        [
            (f, f, 1, score, "", score)
            for f, score in zip(test_frames, test_scores or [0] * len(test_frames), strict=True)
        ],
    )


def minatar_config(game, target_rule, kind, signal, seed) -> dict:
    return {
        "seed": seed,
        "env": {"kind": "minatar", "game": game, "frame_skip": 1, "repeat_action_probability": 0.1},
        "agent": {"target_rule": target_rule},
        "replay": {"kind": kind, "priority_signal": signal, "eviction": "fifo"},
        "train": {
            "total_steps": 1_000_000,
            "learning_start_steps": 5_000,
            "epsilon_decay_steps": 100_000,
            "epsilon_final": 0.1,
        },
        "evaluation": {"every_frames": 500_000, "frames": 10_000, "epsilon": 0.01},
    }


@pytest.fixture
def results(tmp_path) -> Path:
    root = tmp_path / "results"
    for (game, target_rule, kind, signal), seeds in RUNS.items():
        for seed, (first, later, episodes) in seeds.items():
            config = minatar_config(game, target_rule, kind, signal, seed)
            returns = ([first] * 100 + [later] * 100)[:episodes]
            tests = [500_000, 1_000_000] if episodes == 200 else [500_000]
            name = f"minatar/{game}/{target_rule}-{kind}-{signal}/seed{seed}_1M"
            write_export(root / name, config, returns, tests, [first, later][: len(tests)])
    # An Atari export and a MinAtar run that is no export: not in the report.
    atari = minatar_config("breakout", "double_dqn", "uniform", "td_error", 0)
    atari["env"] = {"kind": "atari", "game": "breakout", "frame_skip": 4}
    write_export(root / "breakout/uniform/seed0_4M", atari, [5.0] * 200, [1_000_000])
    (root / "minatar/unexported").mkdir(parents=True)
    (root / "minatar/unexported/config.yaml").write_text(
        OmegaConf.to_yaml(minatar_config("asterix", "dqn", "uniform", "td_error", 0))
    )
    return root


def test_cells_hold_the_statistics_over_the_seeds_that_trained_that_far(results):
    variants, notes = read_variants(read_runs(results, "minatar")[0])
    assert [(v.game, v.name) for v in variants] == [
        ("breakout", "dqn-uniform"),
        ("breakout", "dqn-rank_based"),
        ("breakout", "dqn-proportional-huber_loss"),
        ("freeway", "dqn-uniform"),
        ("seaquest", "uniform"),
    ]
    assert notes == [
        f"{results}/minatar/unexported: no training_returns.csv (not an exported run), left out"
    ]
    at_1m = {(c.variant.game, c.variant.name): c for c in cells_at(variants, 1_000_000)}
    uniform = at_1m["breakout", "dqn-uniform"]
    assert uniform.seeds == 3 and uniform.last_versus_uniform is None
    # Last 100 at 1M: B = 10, 12, 14. Running: (1 − Q)(B + Q A).
    assert uniform.last == pytest.approx((12.0, 2 / np.sqrt(3)), rel=1e-12)
    running = (1 - Q) * (np.array([10, 12, 14]) + Q * np.array([1, 2, 3]))
    assert uniform.running == pytest.approx((running.mean(), running.std(ddof=1) / np.sqrt(3)))
    # Prioritized minus uniform: B = 4, 5, 6 against 10, 12, 14 (Welch, by hand in
    # test_seed_statistics: ν = 50/17, t = 3.2188, standard error √(5/3)).
    difference, low, high = at_1m["breakout", "dqn-proportional-huber_loss"].last_versus_uniform
    assert (difference, low, high) == pytest.approx(
        (-7.0, -11.155399503182505, -2.8446004968174945)
    )
    # The periodic test at 1M: B, as the last 100; seed 2 of Freeway was not tested there.
    assert uniform.test == uniform.last
    prioritized = at_1m["breakout", "dqn-proportional-huber_loss"]
    assert prioritized.test_versus_uniform == prioritized.last_versus_uniform
    assert at_1m["freeway", "dqn-uniform"].test == pytest.approx((21.0, 1.0))
    single = at_1m["breakout", "dqn-rank_based"]
    assert (
        single.seeds == 1 and np.isnan(single.last[1]) and np.isnan(single.last_versus_uniform[1])
    )
    assert at_1m["freeway", "dqn-uniform"].seeds == 2  # seed 2 stopped at 599,900 frames
    assert cells_at(variants, 500_000)[3].seeds == 3


def test_report_tables_figures_and_verdicts(results, tmp_path):
    out = tmp_path / "report"
    text = main(["minatar", str(results), "--out", str(out)]).read_text()
    assert "Runs: 11 (1 unfinished) in 5 game × variant groups; games: 3." in text  # Freeway seed 2
    assert "ε-greedy with ε 0.1 after 105k frames; sticky actions 0.1; 1M frames per run" in text
    assert "periodic test: every 500k frames, 10k frames of ε-greedy play with ε 0.01" in text
    half, full = text.split("## At 500k frames")[1].split("## At 1M frames")
    # 0.5M: last 100 = A: 1, 2, 3 → 2.0 ± 1/√3; running A (1 − Q) → 1.3 ± 0.4. Prioritized
    # A = 2, 3, 4: +1 with ν = 4, t = 2.776, standard error √(2/3): [−1.3, 3.3].
    # The periodic test at 0.5M scores A: the last 100's figures.
    assert (
        "| Breakout | dqn-uniform | 3 of 3 | 2.0 ± 0.6 | 1.3 ± 0.4 | 9.0 | – | – | 2.0 ± 0.6 | – |"
        in half
    )
    assert (
        "| Breakout | dqn-proportional-huber_loss | 3 of 3 | 3.0 ± 0.6 | 1.9 ± 0.4 | 9.0 | "
        "1.0 [-1.3, 3.3] | 0.6 [-0.8, 2.1] | 3.0 ± 0.6 | 1.0 [-1.3, 3.3] |" in half
    )
    assert "No interval lies entirely below or above zero" in half
    # 1M: uniform running (1 − Q)(B + Q A) = 8.07 ± 0.87; prioritized 5.0 ± 0.6 and
    # (1 − Q)(B + Q A) for A = 2..4, B = 4..6: 3.87 ± 0.50.
    assert "| Breakout | dqn-uniform | 3 of 3 | 12.0 ± 1.2 | 8.1 ± 0.9 | 9.0 | – | – |" in full
    assert (
        "| Breakout | dqn-proportional-huber_loss | 3 of 3 | 5.0 ± 0.6 | 3.9 ± 0.5 | 9.0 | "
        "-7.0 [-11.2, -2.8] |"
    ) in full
    assert "| Breakout | dqn-rank_based | 1 of 1 | 8.0 ± – | 6.7 ± – | 9.0 | -4.0 [–, –] |" in full
    assert "| Freeway | dqn-uniform | 2 of 3 | 21.0 ± 1.0 | 18.2 ± 0.9 | 48.0 | – | – |" in full
    assert "| Seaquest | uniform | 1 of 1 | 1.0 ± – | 0.9 ± – | 1.0 † | – | – |" in full
    assert (
        "- Breakout, dqn-proportional-huber_loss: the last-100 average difference "
        "-7.0 [-11.2, -2.8] lies entirely below zero: worse than dqn-uniform."
    ) in full
    assert full.index("| Breakout | dqn-uniform") < full.index("| Breakout | dqn-rank_based")
    for game in ("breakout", "freeway", "seaquest"):
        assert (out / f"minatar_{game}.png").read_bytes()[:4] == b"\x89PNG"
        assert f"![minatar_{game}.png](minatar_{game}.png)" in text
    assert "unexported: no training_returns.csv" in text


def test_single_seeds_beside_uniform_give_no_interval_and_no_claim(results, tmp_path):
    for seed in range(3):
        shutil.rmtree(results / f"minatar/breakout/dqn-proportional-huber_loss/seed{seed}_1M")
    text = main(["minatar", str(results), "--out", str(tmp_path / "report")]).read_text()
    full = text.split("## At 1M frames")[1]
    assert "| Breakout | dqn-rank_based | 1 of 1 | 8.0 ± – | 6.7 ± – | 9.0 | -4.0 [–, –] |" in full
    assert "No interval yet: each prioritized variant that trained this far has one seed" in full
    assert "No interval lies" not in text


def test_a_directory_without_minatar_results_is_refused(results, tmp_path, capsys):
    atari_only = results / "breakout"
    with pytest.raises(SystemExit) as exit_info:
        main(["minatar", str(atari_only), "--out", str(tmp_path / "report")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(
        f"error: {atari_only} holds no exported MinAtar run"
    )
    assert not (tmp_path / "report").exists()


def test_published_values_and_their_comparability():
    reference = published_dqn()
    assert sorted(reference) == ["asterix", "breakout", "freeway", "seaquest", "space_invaders"]
    assert reference["breakout"].returns == {1_000_000: 9.0, 5_000_000: 10.0}
    assert [game for game, r in reference.items() if not r.comparable] == ["seaquest"]


def test_the_dopamine_report_leaves_minatar_runs_out(results, tmp_path):
    text = main(["published", str(results), "--out", str(tmp_path / "published")]).read_text()
    # The MinAtar runs (11 exported, 1 not) are not Atari games: only Atari's Breakout is shown.
    assert "- 12 minatar run(s) left out (not Atari): python -m reporting minatar" in text
    assert "| Breakout | uniform | 1 (0) |" in text and "dqn-uniform" not in text


# The α and β study as `python -m reporting SWEEP RESULTS` reads it: a sweep's runs beside the
# exported runs of the preset (α 0.6, β 0.4 -> 1). Every run returns 1 in its first 100 episodes
# and B after: {(game, α, β0, β final): {seed: B}}.
SWEEP = {
    ("seaquest", 0.2, 0.4, 1.0): {0: 4, 1: 6},
    ("seaquest", 0.4, 0.4, 1.0): {0: 8, 1: 12},
    ("asterix", 0.6, 0.0, 0.0): {0: 2, 1: 4},
    ("asterix", 0.6, 1.0, 1.0): {0: 6, 1: 10},
}
PRESET = {("seaquest", 0.6, 0.4, 1.0): {0: 14, 1: 16}, ("asterix", 0.6, 0.4, 1.0): {0: 3, 1: 5}}


def write_study(root: Path, runs: dict, sweep: bool) -> None:
    for (game, alpha, beta, beta_final), seeds in runs.items():
        for seed, later in seeds.items():
            config = minatar_config(game, "dqn", "proportional", "td_error", seed)
            config["replay"].update(
                priority_exponent=alpha,
                importance_exponent=beta,
                importance_exponent_final=beta_final,
            )
            name = (
                f"env.game={game},replay.importance_exponent={beta},"
                f"replay.priority_exponent={alpha},seed={seed}"
                if sweep
                else f"minatar/{game}/dqn-proportional/seed{seed}_1M"
            )
            write_export(root / name, config, [1] * 100 + [later] * 100, [500_000, 1_000_000])


def test_a_sweep_is_reported_by_its_keys_beside_exported_runs(tmp_path):
    sweep, results, out = tmp_path / "sweep", tmp_path / "results", tmp_path / "report"
    write_study(sweep, SWEEP, sweep=True)
    write_study(results, PRESET, sweep=False)
    text = main([str(sweep), str(results), "--out", str(out)]).read_text()
    assert text.startswith(f"# MinAtar: prioritized against uniform replay: `{sweep}`, `{results}`")
    assert "Runs: 12 in 6 game × variant groups; games: 2." in text
    full = text.split("## At 1M frames")[1]
    # Last 100 at 1M: B over two seeds, mean ± sample deviation / √2.
    beta = "dqn-proportional replay.importance_exponent={} replay.importance_exponent_final={}"
    alpha = "dqn-proportional replay.priority_exponent={}"
    rows = [
        f"| Asterix | {beta.format(0, 0)} | 2 of 2 | 3.0 ± 1.0 |",
        f"| Asterix | {beta.format(0.4, 1)} | 2 of 2 | 4.0 ± 1.0 |",
        f"| Asterix | {beta.format(1, 1)} | 2 of 2 | 8.0 ± 2.0 |",
        f"| Seaquest | {alpha.format(0.2)} | 2 of 2 | 5.0 ± 1.0 |",
        f"| Seaquest | {alpha.format(0.4)} | 2 of 2 | 10.0 ± 2.0 |",
        f"| Seaquest | {alpha.format(0.6)} | 2 of 2 | 15.0 ± 1.0 |",
    ]
    assert [full.index(row) for row in rows] == sorted(full.index(row) for row in rows)
    assert "| Seaquest | dqn-proportional |" not in text
    # The β settings' curves in one figure per game; α, one number swept, also against it.
    figures = ["minatar_asterix.png", "minatar_seaquest.png"]
    figures.append("minatar_seaquest_replay.priority_exponent.png")
    for name in figures:
        assert (out / name).read_bytes()[:4] == b"\x89PNG" and f"![{name}]({name})" in text
    assert sorted(path.name for path in out.glob("*.png")) == sorted(figures)


def test_the_minatar_report_names_each_run_it_leaves_out(results, tmp_path, capsys):
    """The Atari export among the results, and the MinAtar run that is no export."""
    text = main(["minatar", str(results), "--out", str(tmp_path / "report")]).read_text()
    note = "1 atari run(s) left out (not MinAtar): python -m reporting published"
    assert f"- {note}" in text
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and "unexported: no training_returns.csv" in notes[0]
    assert notes[1] == f"note: {note}"
