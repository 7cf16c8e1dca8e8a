"""The published report's table of each run's evaluation after training: `python evaluate.py
RUN_DIR`'s no-op starts protocol (docs/evaluation.md), as its JSON report, exported with the
run, records it.

One row per run, evaluated or not: a run without the report says so, with no number.
"""

from collections.abc import Sequence

from envs.games import resolve_game
from reporting.markdown import format_mean_error, format_percent, markdown_row
from reporting.results import ExportedRun, count_name

NOOP = "noop"  # evaluate.py's default protocol, whose reference scores the report uses


def evaluation_row(run: ExportedRun) -> str:
    """One markdown row (columns in `evaluation_section`)."""
    info = run.info
    cells = [resolve_game(info.game).name, info.variant, str(info.seed)]
    cells.append(f"{count_name(info.total_frames)} frames")
    evaluated = run.evaluation(NOOP)
    if evaluated is None:
        return markdown_row([*cells, "not evaluated", "–", "–", "–", "–"])
    score = evaluated.score
    return markdown_row(
        [
            *cells,
            f"{evaluated.snapshot}, {count_name(score.frames)} frames",
            str(score.episodes),
            "–" if score.epsilon is None else f"{score.epsilon:g}",
            format_mean_error(score.mean, score.std),
            format_percent(score.normalized),
        ]
    )


def evaluation_section(runs: Sequence[ExportedRun]) -> list[str]:
    """The report's section: what the table holds, and a row per run of `runs`."""
    return [
        "## Evaluation after training",
        "",
        "`python evaluate.py RUN_DIR` on the run's snapshot (*snapshot*: the agent of its best "
        "periodic test or its latest one, and the frames it had trained), with no-op starts "
        "(1–30 random no-ops; by default 30 episodes, ε 0.01); exported with the run "
        f"(`evaluation_{NOOP}.json`). *Score*: the mean over the episodes ± their standard "
        "deviation; *normalized*: (mean − random) / |human − random| with the no-op reference "
        "scores, as evaluate.py computed it. *not evaluated*: the run has no such report.",
        "",
        "| game | variant | seed | budget | snapshot | episodes | ε | score | normalized |",
        "|---|---|---|---|---|---|---|---|---|",
        *map(evaluation_row, runs),
    ]
