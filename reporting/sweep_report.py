"""Builds the sweep report: per game and variant the statistics over seeds, the Figure 4
learning-speed summary, the markdown table and the figures."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from artifacts.run_directory import find_runs
from envs.games import resolve_game
from evaluation.scores import reference_scores
from reporting import curves
from reporting.runs import EVAL_TAG, Run, load_runs

MAX_EVAL_BINS = 200  # the paper's 200M frames hold 200 test evaluations
EPISODE_BINS = 50  # training returns are irregular and noisy: average them over 2 % slices
KIND_ORDER = ("uniform", "rank_based", "proportional")


@dataclass(frozen=True)
class Group:
    """The runs of one game and replay kind, on the common grid (one row per seed)."""

    game: str
    kind: str
    seeds: tuple[int, ...]
    total_steps: int
    curves: np.ndarray  # seeds × bins

    @property
    def median(self) -> np.ndarray:
        return curves.median(self.curves)


@dataclass(frozen=True)
class Report:
    tag: str
    bins: int
    groups: list[Group]
    speeds: list[curves.LearningSpeed]
    notes: list[str]


def grid_size(runs: Sequence[Run]) -> int:
    """Test evaluations: one point per evaluation (the most any run has, up to 200); training
    returns: 50 slices."""
    if runs and runs[0].tag == EVAL_TAG:
        return min(MAX_EVAL_BINS, max(run.steps.size for run in runs))
    return EPISODE_BINS


def kind_key(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def group_runs(runs: Sequence[Run], bins: int) -> list[Group]:
    by_key: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_key.setdefault((run.info.game, run.info.kind), []).append(run)
    groups = []
    for (game, kind), members in sorted(by_key.items(), key=lambda i: (i[0][0], kind_key(i[0][1]))):
        members.sort(key=lambda run: run.info.seed)
        rows = [curves.binned(r.steps, r.values, r.info.total_steps, bins) for r in members]
        groups.append(
            Group(
                game,
                kind,
                tuple(r.info.seed for r in members),
                max(r.info.total_steps for r in members),
                np.array(rows),
            )
        )
    return groups


def build_report(multirun_dir: Path) -> Report:
    infos = find_runs(multirun_dir)
    if not infos:
        raise ValueError(f"{multirun_dir} holds no run: no config.yaml with a replay.kind below it")
    runs, notes = load_runs(infos)
    if not runs:
        raise ValueError(f"{multirun_dir}: no run has scalars to report ({'; '.join(notes)})")
    bins = grid_size(runs)
    groups = group_runs(runs, bins)
    medians = {(g.game, g.kind): g.median for g in groups}
    random_scores = {g.game: reference_scores(g.game, "noop")[0] for g in groups}
    return Report(runs[0].tag, bins, groups, curves.learning_speed(medians, random_scores), notes)


def format_score(value: float) -> str:
    return "–" if value is None or np.isnan(value) else f"{value:.1f}"


def format_percent(value: float | None) -> str:
    return "–" if value is None or np.isnan(value) else f"{100 * value:.1f} %"


def format_interval(value: float, low: float, high: float) -> str:
    """`value [low, high]`, each as `format_score` writes it (– where absent)."""
    return f"{format_score(value)} [{format_score(low)}, {format_score(high)}]"


def format_mean_error(mean: float, error: float) -> str:
    """`mean ± error`, each as `format_score` writes it (– where absent)."""
    return f"{format_score(mean)} ± {format_score(error)}"


def markdown_row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def game_rows(report: Report) -> list[str]:
    """One markdown row per game and variant (see `markdown` for the columns)."""
    uniform_best = {g.game: np.nanmax(g.median) for g in report.groups if g.kind == "uniform"}
    rows = []
    for group in report.groups:
        game = resolve_game(group.game)
        random_score, human_score = reference_scores(group.game, "noop")
        final = float(np.nanmedian(group.curves[:, -1]))
        best = float(np.nanmedian(np.nanmax(group.curves, axis=1)))
        human = [curves.normalized(v, random_score, human_score) for v in (final, best)]
        baseline = uniform_best.get(group.game)
        versus, reaches = None, None
        if baseline is not None and abs(baseline - random_score) > 1e-9:
            best_so_far = curves.normalized(
                curves.running_max(group.median), random_score, baseline
            )
            versus, reaches = best_so_far[-1], curves.equivalence_point(best_so_far)
        cells = [
            game.name,
            group.kind,
            str(len(group.seeds)),
            format_score(final),
            format_score(best),
            *map(format_percent, (*human, versus, reaches)),
        ]
        rows.append(markdown_row(cells))
    return rows


def speed_rows(report: Report) -> list[str]:
    return [
        f"| {s.kind} | {s.games} | {format_percent(s.best_so_far[-1])} | "
        f"{format_percent(s.best_equivalence)} | {format_percent(s.mean_so_far[-1])} | "
        f"{format_percent(s.mean_equivalence)} |"
        for s in report.speeds
    ]


def markdown(report: Report, multirun_dir: Path, figures: Sequence[str]) -> str:
    source = (
        "test evaluations (`eval/score`, no-op starts, ε 0.01)"
        if report.tag == EVAL_TAG
        else "training episode returns (`episode/return`: no test evaluation was logged)"
    )
    seeds = sorted({len(g.seeds) for g in report.groups})
    lines = [
        f"# Sweep report: `{multirun_dir}`",
        "",
        f"{len(report.groups)} game × variant groups, {'/'.join(map(str, seeds))} seeds each; "
        f"scores are {source}, on {report.bins} points per run (fractions of its training).",
        "Human-normalized: (score − random) / |human − random| with the no-op reference "
        "scores; *vs uniform*: the same with the best score of the uniform median curve as "
        "reference (the paper's Figure 4 baseline).",
        "",
        "## Per game",
        "",
        "| game | variant | seeds | final score | best score | final, human-norm. | "
        "best, human-norm. | best vs uniform | reaches uniform's best at |",
        "|---|---|---|---|---|---|---|---|---|",
        *game_rows(report),
        "",
        "*final*: median over seeds of the last point; *best*: median over seeds of each "
        "seed's best point; *best vs uniform* and *reaches …*: the median curve's best so far, "
        "and the first fraction of training where it matches the uniform median's best.",
        "",
        "## Learning speed (Figure 4)",
        "",
        "Median over games of the baseline-normalized best-so-far score (left panel) and "
        "mean-so-far score (right panel; baseline: the uniform median's mean over training); "
        "*reaches 100 %* is the fraction of training where a variant matches uniform Double "
        "DQN (the paper: 47 % rank-based, 38 % proportional on the left; 41 %, 43 % right).",
        "",
        "| variant | games | best so far, at the end | reaches 100 % | mean so far, at the end "
        "| reaches 100 % |",
        "|---|---|---|---|---|---|",
        *(speed_rows(report) or ["| – | no game has a uniform baseline | | | | |"]),
        "",
        "## Figures",
        "",
        *[f"![{name}]({name})" for name in figures],
    ]
    if report.notes:
        lines += ["", "## Left out", "", *[f"- {note}" for note in report.notes]]
    return "\n".join(lines) + "\n"
