"""`python -m reporting export` and `published` on tiny runs whose numbers are worked out by
hand below; their refusals."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from artifacts.provenance import Provenance
from envs.games import resolve_game
from evaluation.protocol_registry import PROTOCOLS
from evaluation.scores import normalized_score
from reporting import published, report
from reporting.__main__ import main
from reporting.published import dopamine_curves, iteration_means
from reporting.score_table import RunScore, game_rows, write_report

# Pong's no-op reference scores: random −20.7, human 14.6 (|human − random| = 35.3).
# Run 0 of 2M frames is tested at 1M, 1.5M and 2M frames; run 1 of 1.5M frames at 1M and 1.5M,
# without the per-episode text summary; an Alien run is tested once. evaluate.py evaluated run 0
# (its best snapshot with no-op starts, its latest from human starts) and the Alien run; run 0
# records a change made on resume.
RUNS = {
    "pong_prop_0": dict(
        game="Pong",
        kind="proportional",
        seed=0,
        total_steps=500_000,
        evaluations=[
            (250_000, -20.0, "[-21.0, -19.0]"),
            (375_000, -17.0, "[-18.0, -17.0, -16.0]"),
            (500_000, -15.0, "[-15.0]"),
        ],
        returns=[(1_000, -21.0), (2_500, -20.0)],
        evaluated={
            "noop": ("best", 1_500_000, [-15.0, -13.0, -14.0]),
            "human_starts": ("latest", 2_000_000, [-18.0]),
        },
        changes=[{"step": 1_000, "setting": "agent.cuda_graphs", "from": True, "to": False}],
    ),
    "pong_prop_1": dict(
        game="pong",
        kind="proportional",
        seed=1,
        total_steps=375_000,
        evaluations=[(250_000, -19.5, None), (375_000, -16.0, None)],
        returns=[(900, -21.0)],
    ),
    "alien_uniform_3": dict(
        game="ALE/Alien-v5",
        kind="uniform",
        seed=3,
        total_steps=1_000,
        evaluations=[(500, 300.0, "[300.0]")],
        returns=[],
        evaluated={"noop": ("latest", 2_000, [250.0, 350.0])},
    ),
}


def write_evaluated(run_dir: Path, game, kind, seed, protocol_name, snapshot, frames, scores):
    """The report evaluate.py writes into a run directory on evaluating its snapshot."""
    protocol = PROTOCOLS[protocol_name]
    mean = float(np.mean(scores))
    score = RunScore(
        run=run_dir.name,
        game=resolve_game(game).rom_id,
        variant=kind,
        seed=seed,
        step=frames // 4,
        frames=frames,
        episodes=len(scores),
        mean=mean,
        std=float(np.std(scores)),
        normalized=normalized_score(mean, game, protocol.reference),
        partial=False,
        episode_scores=tuple(scores),
        epsilon=protocol.epsilon,
    )
    header = {"title": protocol.title, "normalized": True, "snapshot": snapshot}
    write_report(run_dir, protocol, header, [score], game_rows([score], protocol), [])


def write_run(
    run_dir: Path,
    game,
    kind,
    seed,
    total_steps,
    evaluations,
    returns,
    evaluated=None,
    changes=None,
    finished=True,
) -> None:
    run_dir.mkdir(parents=True)
    config = {
        "seed": seed,
        "env": {"game": game, "frame_skip": 4},
        "replay": {"kind": kind},
        "train": {"total_steps": total_steps},
    }
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))
    (run_dir / "agent_best.pt").write_bytes(b"not exported")
    if finished:
        (run_dir / "agent_final.pt").write_bytes(b"not exported")
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    for step, score, episode_scores in evaluations:
        writer.add_scalar("eval/score", score, step)
        writer.add_scalar("eval_vs_frames/score", score, 4 * step)
        if episode_scores is not None:
            writer.add_scalar("eval/episodes", episode_scores.count(",") + 1, step)
            writer.add_text("eval/episode_scores", episode_scores, step)
    for step, value in returns:
        writer.add_scalar("episode/return", value, step)
    writer.close()
    for protocol, evaluation in (evaluated or {}).items():
        write_evaluated(run_dir, game, kind, seed, protocol, *evaluation)
    if changes is not None:
        (run_dir / "changes.yaml").write_text(OmegaConf.to_yaml(changes))


@pytest.fixture
def multirun(tmp_path) -> Path:
    root = tmp_path / "multirun"
    for name, run in RUNS.items():
        write_run(root / name, **run)
    return root


def files_below(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


EXPORTED = (
    "config.yaml",
    "evaluations.csv",
    "provenance.yaml",
    "trained.yaml",
    "training_returns.csv",
)
NOOP_REPORT = ("evaluation_noop.csv", "evaluation_noop.json")
# What run 0 has beside the files every exported run has, copied as they are.
COPIED = (
    "changes.yaml",
    "evaluation_human_starts.csv",
    "evaluation_human_starts.json",
    *NOOP_REPORT,
)


def test_export_writes_small_files_with_the_logged_numbers(multirun, tmp_path):
    main(["export", str(multirun), "--out", str(tmp_path / "results")])
    results = tmp_path / "results"
    exported = {
        "alien/uniform/seed3_4k": (*EXPORTED, *NOOP_REPORT),
        "pong/proportional/seed0_2M": (*EXPORTED, *COPIED),
        "pong/proportional/seed1_1500k": EXPORTED,
    }
    assert files_below(results) == sorted(
        f"{run}/{name}" for run, names in exported.items() for name in names
    )
    run = results / "pong/proportional/seed0_2M"
    for name in ("config.yaml", *COPIED):
        assert (run / name).read_bytes() == (multirun / "pong_prop_0" / name).read_bytes()
    # normalized: (−20 + 20.7) / 35.3, (−17 + 20.7) / 35.3, (−15 + 20.7) / 35.3
    assert (run / "evaluations.csv").read_text() == (
        "step,frames,episodes,mean_score,normalized_score,episode_scores\n"
        "250000,1000000,2,-20,0.019830028,-21 -19\n"
        "375000,1500000,3,-17,0.10481586,-18 -17 -16\n"
        "500000,2000000,1,-15,0.16147308,-15\n"
    )
    assert (run / "training_returns.csv").read_text() == (
        "step,frames,return\n1000,4000,-21\n2500,10000,-20\n"
    )
    # Without the text summary (and eval/episodes), those cells are empty.
    assert (results / "pong/proportional/seed1_1500k/evaluations.csv").read_text() == (
        "step,frames,episodes,mean_score,normalized_score,episode_scores\n"
        "250000,1000000,,-19.5,0.033994336,\n"
        "375000,1500000,,-16,0.13314448,\n"
    )
    assert (results / "alien/uniform/seed3_4k/training_returns.csv").read_text() == (
        "step,frames,return\n"
    )


def test_report_beside_dopamine_at_the_last_shared_frame_count(multirun, tmp_path):
    results = tmp_path / "results"
    main(["export", str(multirun), "--out", str(results)])
    report = main(["published", str(results), "--out", str(tmp_path / "report")])
    text = report.read_text()
    # Pong proportional: runs of two budgets are two rows, never pooled. The 1.5M-frame run's
    # last test: −16, normalized (−16 + 20.7) / 35.3 = 13.3 %; Dopamine's last point at or
    # before 1.5M is its 1M one: DQN −20.33 [−20.56, −20.18], Rainbow −20.42 [−20.48, −20.35].
    # The 2M-frame run's: −15 at 2M, (−15 + 20.7) / 35.3 = 16.1 %.
    assert (
        "| Pong | proportional | 1 (1) | 1500k frames (375k steps) "
        "| 1500k | -16.0 [-16.0, -16.0] | -20.7 | 14.6 | 13.3 % | 1M | "
        "-20.3 [-20.6, -20.2] | -20.4 [-20.5, -20.4] |"
    ) in text
    assert (
        "| Pong | proportional | 1 (0) | 2M frames (500k steps) "
        "| 2M | -15.0 [-15.0, -15.0] | -20.7 | 14.6 | 16.1 % | 2M | "
    ) in text
    # Alien: (300 − 227.8) / (7127.7 − 227.8) = 1.0 %; Dopamine has no Alien curve.
    assert (
        "| Alien | uniform | 1 (3) | 4k frames (1k steps) | 2k | 300.0 [300.0, 300.0] | "
        "227.8 | 7127.7 | 1.0 % | – | – | – | unknown |"  # made before runs recorded their code
    ) in text
    assert "| unknown | unknown | 3 |" in text.split("## Code")[1]
    for figure in ("published_alien_4k.png", "published_pong_1500k.png", "published_pong_2M.png"):
        assert (tmp_path / "report" / figure).read_bytes()[:4] == b"\x89PNG"  # one per budget
        assert f"![{figure}]({figure})" in text


def test_reexport_overwrites_its_own_files_only(multirun, tmp_path, capsys):
    results = multirun / "results"  # inside the multirun: its exports are not runs
    main(["export", str(multirun / "pong_prop_0"), "--out", str(results)])
    mine = results / "pong/proportional/seed0_2M/evaluations.csv"
    mine.write_text("stale")
    (results / "README.md").write_text("the user's")
    main(["export", str(multirun), "--out", str(results)])
    assert mine.read_text().startswith("step,frames")
    assert (results / "README.md").read_text() == "the user's"
    assert "note" not in capsys.readouterr().err


def refusal(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    return error


def test_a_path_without_runs_is_refused_before_writing(multirun, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "results"
    error = refusal(["export", str(multirun), str(tmp_path / "empty"), "--out", str(out)], capsys)
    assert "empty holds no run" in error and not out.exists()


def test_an_unwritable_out_is_refused_before_writing(multirun, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    error = refusal(["export", str(multirun), "--out", str(tmp_path / "file/results")], capsys)
    assert error == (
        f"error: argument --out: {tmp_path}/file/results cannot be used: {tmp_path}/file is a "
        f"file, so {tmp_path}/file/results cannot be created\n"
    )


def test_another_run_under_the_same_name_is_refused(multirun, tmp_path, capsys):
    results = tmp_path / "results"
    main(["export", str(multirun / "pong_prop_0"), "--out", str(results)])
    config = results / "pong/proportional/seed0_2M/config.yaml"
    config.write_text(config.read_text().replace("proportional", "proportional\n  alpha: 0.7"))
    capsys.readouterr()
    error = refusal(["export", str(multirun), "--out", str(results)], capsys)
    assert "another config" in error
    assert not (results / "alien").exists()


def test_the_same_settings_in_another_order_are_the_same_config(multirun, tmp_path):
    results = tmp_path / "results"
    main(["export", str(multirun / "pong_prop_0"), "--out", str(results)])
    config = results / "pong/proportional/seed0_2M/config.yaml"
    settings = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump(dict(reversed(settings.items())), sort_keys=False))
    main(["export", str(multirun / "pong_prop_0"), "--out", str(results)])
    assert config.read_bytes() == (multirun / "pong_prop_0/config.yaml").read_bytes()


def test_the_report_refuses_a_directory_without_exported_runs(multirun, tmp_path, capsys):
    error = refusal(["published", str(multirun), "--out", str(tmp_path / "report")], capsys)
    assert "no exported run" in error


def test_dopamine_game_names_resolve_to_rom_ids():
    assert sorted({game for game, _ in dopamine_curves()}) == [
        "asterix",
        "boxing",
        "breakout",
        "enduro",
        "ms_pacman",
        "pong",
        "qbert",
        "road_runner",
        "seaquest",
        "space_invaders",
    ]
    dqn = dopamine_curves()["ms_pacman", "DQN"]
    assert dqn.frames.size == 199 and dqn.frames[0] == 1_000_000 and dqn.frames[-1] == 199e6


def test_iteration_means_count_each_episode_in_the_iteration_it_ends_in():
    frames = np.array([400_000, 960_000, 1_000_000, 1_200_000, 2_400_000, 2_800_000, 3_100_000])
    returns = np.array([1.0, 3.0, 5.0, 2.0, 4.0, 6.0, 9.0])
    # (0, 1M]: 1, 3, 5; (1M, 2M]: 2; (2M, 3M]: 4, 6; (3M, 4M] is not complete at 3.1M frames.
    ends, means = iteration_means(frames, returns, trained_frames=3_100_000)
    assert ends.tolist() == [1_000_000, 2_000_000, 3_000_000]
    assert means.tolist() == [3.0, 2.0, 5.0]
    # An iteration in which no episode ended has no point.
    ends, means = iteration_means(frames[3:], returns[3:], trained_frames=3_100_000)
    assert ends.tolist() == [2_000_000, 3_000_000] and means.tolist() == [2.0, 5.0]


def test_report_gives_training_returns_per_iteration_beside_dopamine(tmp_path):
    write_run(
        tmp_path / "runs" / "breakout",
        game="breakout",
        kind="uniform",
        seed=0,
        total_steps=1_000_000,
        evaluations=[(250_000, 1.0, "[1.0]"), (500_000, 2.0, "[2.0]"), (750_000, 3.0, "[3.0]")],
        # episodes ending at 0.4M, 0.96M, 1M, 1.2M, 2.4M and 2.8M frames
        returns=[
            (100_000, 1.0),
            (240_000, 3.0),
            (250_000, 5.0),
            (300_000, 2.0),
            (600_000, 4.0),
            (700_000, 6.0),
        ],
        finished=False,  # stopped after its test at 3M frames
    )
    results = tmp_path / "results"
    main(["export", str(tmp_path / "runs"), "--out", str(results)])
    report = main(["published", str(results), "--out", str(tmp_path / "report")])
    # Trained 3M frames (its last test); iterations 1M: 3, 2M: 2, 3M: 5. Dopamine at 3M:
    # DQN 3.98 [3.33, 4.51], Rainbow 11.31 [11.07, 12.9].
    assert (
        "| Breakout | uniform | 1 | 3.00M of 4M | 3M | 5.0 [5.0, 5.0] | 4.0 [3.3, 4.5] "
        "| 11.3 [11.1, 12.9] |"
    ) in report.read_text()
    assert (tmp_path / "report" / "training_breakout_4M.png").read_bytes()[:4] == b"\x89PNG"


def test_report_shows_each_runs_noop_evaluation_or_that_it_has_none(multirun, tmp_path):
    results = tmp_path / "results"
    main(["export", str(multirun), "--out", str(results)])
    text = main(["published", str(results), "--out", str(tmp_path / "report")]).read_text()
    table = text.split("## Evaluation after training")[1].split("\n\n")[2]
    # Alien: 250 and 350, mean 300 ± 50, (300 − 227.8) / (7127.7 − 227.8) = 1.0 %. Pong run 0's
    # no-op report (its human-starts one is not this table's): −15, −13 and −14, mean −14 ±
    # √(2/3) = 0.8, (−14 + 20.7) / 35.3 = 19.0 %. Pong run 1 has no report: no number.
    assert table == (
        "| game | variant | seed | budget | snapshot | episodes | ε | score | normalized |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        "| Alien | uniform | 3 | 4k frames | latest, 2k frames | 2 | 0.01 | 300.0 ± 50.0 "
        "| 1.0 % |\n"
        "| Pong | proportional | 1 | 1500k frames | not evaluated | – | – | – | – |\n"
        "| Pong | proportional | 0 | 2M frames | best, 1500k frames | 3 | 0.01 | -14.0 ± 0.8 "
        "| 19.0 % |"
    )


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("evaluation_noop.json", '{"runs": [', "is unreadable: Expecting value: line 1 column 11"),
        (
            "evaluation_noop.json",
            '{"snapshot": "best", "runs": []}',
            "is not evaluate.py's report on one run: 0 runs' scores where a run directory's "
            "report has one",
        ),
        (
            "evaluation_human_starts.json",
            '{"snapshot": "final", "runs": [{}]}',
            "is not evaluate.py's report on one run: snapshot 'final', not one of best, latest",
        ),
        (
            "evaluation_human_starts.csv",
            "game,score\nPong,-18\n",
            "is not evaluate.py's report: its header is not a score table's",
        ),
        ("changes.yaml", "- step: [1\n", "is unreadable: while parsing a flow sequence"),
    ],
)
def test_a_damaged_file_to_copy_is_refused_before_writing(
    multirun, tmp_path, capsys, name, text, problem
):
    results = tmp_path / "results"
    main(["export", str(multirun), "--out", str(results)])
    stale = results / "alien/uniform/seed3_4k/evaluation_noop.json"  # written first, were it
    stale.write_text("exported before")
    (multirun / "pong_prop_0" / name).write_text(text)
    capsys.readouterr()
    error = refusal(["export", str(multirun), "--out", str(results)], capsys)
    assert error.startswith("error: ") and f"{multirun / 'pong_prop_0' / name} " in error
    assert problem in error
    assert stale.read_text() == "exported before"
    refusal(["export", str(multirun), "--out", str(tmp_path / "new")], capsys)
    assert not (tmp_path / "new").exists()


def test_the_papers_colour_goes_to_its_settings_before_another_variant_of_the_kind():
    names = [("dqn-uniform", "uniform"), ("uniform train.total_steps=1", "uniform")]
    names += [("proportional-keep_maximum_step", "proportional"), ("rank_based", "rank_based")]
    colours = report.variant_colours(names)
    assert colours["uniform train.total_steps=1"] == "black"
    assert colours["rank_based"] == "red" and colours["proportional-keep_maximum_step"] == "blue"
    assert colours["dqn-uniform"] not in report.COLOURS.values()


def test_the_papers_colour_goes_to_the_longest_newest_run_of_its_settings():
    def variant(name, kind, frames, *started):
        starts = tuple({"step": 0, "time": time} for time in started)
        info = SimpleNamespace(total_frames=frames, provenance=Provenance(starts))
        group = SimpleNamespace(kind=kind, runs=[SimpleNamespace(info=info)])
        return SimpleNamespace(key=name, group=group)

    variants = [
        variant("proportional 10M", "proportional", 10_000_000),  # started before provenance
        variant("proportional 2M", "proportional", 2_000_000, "2026-11-29T06:00:00Z"),
        variant("proportional beta=1 10M", "proportional", 10_000_000, "2026-11-20T06:00:00Z"),
        variant("proportional beta=0 10M", "proportional", 10_000_000, "2026-11-29T06:00:00Z"),
        variant("dqn-uniform 10M", "uniform", 10_000_000, "2026-11-30T06:00:00Z"),
        variant("uniform 2M", "uniform", 2_000_000),
    ]
    colours = published.variant_colours(variants)
    assert colours["proportional beta=0 10M"] == "blue" and colours["uniform 2M"] == "black"
    assert len(set(colours.values())) == len(variants)
