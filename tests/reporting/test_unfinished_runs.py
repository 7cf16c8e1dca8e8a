"""A run that has not finished (no final snapshot, `agent_final.pt`): its export says how far it
trained and is named so that it cannot pass for a whole run, and every report marks it, ends its
curves where it stopped and never pools it with finished seeds without saying so."""

import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from reporting.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
TOTAL_STEPS = 1_000  # 4,000 frames; a periodic test every 250 steps
STOPPED_AT = 333  # the unfinished seed: a third of its budget


def write_run(run_dir: Path, seed: int, scores: dict[int, float], last_step: int) -> None:
    """A Pong proportional run that tested at `scores` (step -> score) and logged its loss
    until `last_step`; finished (a final snapshot) where it reached its budget."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "seed": seed,
        "env": {"game": "pong", "frame_skip": 4},
        "replay": {"kind": "proportional"},
        "train": {"total_steps": TOTAL_STEPS},
    }
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    for step, score in scores.items():
        writer.add_scalar("eval/score", score, step)
    for step in range(10, last_step + 1, 10):
        writer.add_scalar("train/loss", 0.5, step)
        writer.add_scalar("episode/return", float(seed), step)
    writer.close()
    if last_step == TOTAL_STEPS:
        (run_dir / "agent_final.pt").write_bytes(b"a snapshot")


@pytest.fixture
def multirun(tmp_path) -> Path:
    """Seeds 0 and 1 finished, scoring 10 k + seed at test k; seed 2 stopped after its first
    test, where it scored 100."""
    root = tmp_path / "multirun"
    for seed in (0, 1):
        scores = {250 * k: 10.0 * k + seed for k in range(1, 5)}
        write_run(root / f"seed={seed}", seed, scores, TOTAL_STEPS)
    write_run(root / "seed=2", 2, {250: 100.0}, STOPPED_AT)
    return root


def test_an_unfinished_export_says_how_far_it_trained_and_a_later_export_replaces_it(
    multirun, tmp_path
):
    results = tmp_path / "results"
    main(["export", str(multirun), "--out", str(results)])
    runs = sorted(path.name for path in (results / "pong/proportional").iterdir())
    assert runs == ["seed0_4k", "seed1_4k", "seed2_4k_unfinished"]
    unfinished = results / "pong/proportional/seed2_4k_unfinished"
    record = yaml.safe_load((unfinished / "trained.yaml").read_text())
    assert record == {"steps": STOPPED_AT - STOPPED_AT % 10, "frames": 1_320, "finished": False}
    finished = yaml.safe_load((results / "pong/proportional/seed0_4k/trained.yaml").read_text())
    assert finished == {"steps": TOTAL_STEPS, "frames": 4_000, "finished": True}
    # Exported again while it trains: the same directory, further on.
    write_run(multirun / "seed=2", 2, {250: 100.0, 500: 20.0}, 600)
    main(["export", str(multirun), "--out", str(results)])
    record = yaml.safe_load((unfinished / "trained.yaml").read_text())
    assert record["steps"] == 600 and "500,2000," in (unfinished / "evaluations.csv").read_text()
    # Once it has finished, its whole export replaces the unfinished one.
    write_run(multirun / "seed=2", 2, {250 * k: 10.0 * k + 2 for k in range(1, 5)}, TOTAL_STEPS)
    main(["export", str(multirun), "--out", str(results)])
    runs = sorted(path.name for path in (results / "pong/proportional").iterdir())
    assert runs == ["seed0_4k", "seed1_4k", "seed2_4k"]


def test_a_run_started_again_does_not_overwrite_its_export_that_trained_further(
    multirun, tmp_path, capsys
):
    results = tmp_path / "results"
    write_run(multirun / "seed=2", 2, {250: 100.0, 500: 20.0}, 600)
    main(["export", str(multirun), "--out", str(results)])
    unfinished = results / "pong/proportional/seed2_4k_unfinished"
    exported = {path.name: path.read_bytes() for path in unfinished.iterdir()}
    # Its machine lost, the run starts again from its first step: 330 steps, behind its 600.
    shutil.rmtree(multirun / "seed=2")
    write_run(multirun / "seed=2", 2, {250: 7.0}, STOPPED_AT)
    main(["export", str(multirun), "--out", str(results)])
    assert {path.name: path.read_bytes() for path in unfinished.iterdir()} == exported
    note = f"{multirun / 'seed=2'}: trained 1,320 frames, not exported: {unfinished} holds"
    assert f"{note} its export to 2,400 frames, kept" in capsys.readouterr().err
    # Once it has trained further, its export moves on.
    write_run(multirun / "seed=2", 2, {250: 7.0, 500: 8.0, 750: 9.0}, 800)
    main(["export", str(multirun), "--out", str(results)])
    assert yaml.safe_load((unfinished / "trained.yaml").read_text())["steps"] == 800


def test_the_sweep_report_ends_an_unfinished_curve_where_it_stopped_and_says_so(multirun, tmp_path):
    text = main([str(multirun), "--out", str(tmp_path / "report")]).read_text()
    # The final score is over the two seeds that reached the end (40 and 41), not seed 2's
    # 100 carried there; each seed's best is over what it trained: 40, 41 and 100.
    assert "| Pong | proportional | 3 (1 unfinished) | 40.5 | 41.0 |" in text
    assert "Runs: 3 (1 unfinished) in 1 game × variant groups" in text
    assert f"- {multirun / 'seed=2'}: trained 1,320 of 4,000 frames (330 of 1,000 steps)" in text


def test_the_published_report_marks_an_unfinished_seed(multirun, tmp_path):
    results = tmp_path / "results"
    main(["export", str(multirun), "--out", str(results)])
    text = main(["published", str(results), "--out", str(tmp_path / "report")]).read_text()
    # Compared where all three were tested: the first test, 10, 11 and 100.
    assert "| Pong | proportional | 3 (0, 1, 2: unfinished) | 4k frames (1k steps) | 1k |" in text
    unfinished = results / "pong/proportional/seed2_4k_unfinished"
    assert f"- {unfinished}: trained 1,320 of 4,000 frames (330 of 1,000 steps)" in text


def test_an_export_from_before_the_record_is_read_from_what_it_holds(tmp_path):
    """The rank-based Breakout run exported at 9.53M of its 10M frames, before exports
    recorded whether a run finished: its last test (9M frames) is short of its budget."""
    results = tmp_path / "results"
    for name in ("beta_on_run_clock/breakout/rank_based", "breakout/uniform"):
        shutil.copytree(ROOT / "results" / name / "seed0_10M", results / name / "seed0_10M")
    text = main(["published", str(results), "--out", str(tmp_path / "report")]).read_text()
    rank_based = results / "beta_on_run_clock/breakout/rank_based/seed0_10M"
    assert f"- {rank_based}: trained 9,522,916 of 10,000,000 frames" in text
    assert "| Breakout | rank_based | 1 (0: unfinished) |" in text
    assert "| Breakout | uniform | 1 (0) |" in text  # tested at its budget: finished


def test_the_minatar_report_marks_an_unfinished_seed_where_it_is_pooled(tmp_path):
    """Seeds of 1M frames ending an episode every 100k frames and tested every 500k; seed 2
    stopped at 600k frames, so its export's last records are at 500k."""
    results = tmp_path / "results"
    for seed in (0, 1, 2):
        run_dir = results / f"minatar/breakout/dqn-uniform/seed{seed}_1M"
        run_dir.mkdir(parents=True)
        config = {
            "seed": seed,
            "env": {"kind": "minatar", "game": "breakout", "frame_skip": 1},
            "agent": {"target_rule": "dqn"},
            "replay": {"kind": "uniform"},
            "train": {"total_steps": 1_000_000},
        }
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
        end = 1_000_000 if seed < 2 else 600_000
        returns = "".join(f"{f},{f},{seed}\n" for f in range(100_000, end, 100_000))
        (run_dir / "training_returns.csv").write_text("step,frames,return\n" + returns)
        tests = "".join(f"{f},{f},1,{seed},,\n" for f in range(500_000, end + 1, 500_000))
        (run_dir / "evaluations.csv").write_text(
            "step,frames,episodes,mean_score,normalized_score,episode_scores\n" + tests
        )
    text = main(["minatar", str(results), "--out", str(tmp_path / "report")]).read_text()
    half, full = text.split("## At 500k frames")[1].split("## At 1M frames")
    assert "| Breakout | dqn-uniform | 3 of 3 (1 unfinished) |" in half
    assert "| Breakout | dqn-uniform | 2 of 3 |" in full
    unfinished = results / "minatar/breakout/dqn-uniform/seed2_1M"
    assert f"- {unfinished}: trained 500,000 of 1,000,000 frames" in text
