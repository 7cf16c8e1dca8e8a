"""The sweep report over Atari runs: per game and setting the statistics over seeds, the Figure 4
learning-speed summary, the markdown table and the figures.

It reads exported runs (`reporting.results`): `python -m reporting DIR` exports the runs below
its directories into a scratch directory first (`export.export_scratch`). A row is a
`results.Setting`: a game, a variant and the values of the keys varied between that variant's
runs, so that only runs that differ in their seed alone are pooled as seeds.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from artifacts.provenance import code_of
from envs.games import resolve_game
from evaluation.scores import reference_scores
from reporting import curves, export
from reporting.markdown import format_percent, format_score, markdown_row, report_end
from reporting.plots import label, variant_colours
from reporting.results import ExportedRun, Series, Setting, by_setting, kind_key

MAX_EVAL_BINS = 200  # the paper's 200M frames hold 200 test evaluations
EPISODE_BINS = 50  # training returns are irregular and noisy: average them over 2 % slices


@dataclass(frozen=True)
class Group:
    """The runs of one game and setting, on the common grid (one row per run, by seed)."""

    game: str
    name: str  # the setting's (`results.Setting.name`): the variant and the varied values
    kind: str  # its replay kind
    seeds: tuple[int, ...]
    total_steps: int
    curves: np.ndarray  # runs × bins
    code: str  # the commits that made its runs (`artifacts.provenance.code_of`)

    @property
    def median(self) -> np.ndarray:
        return curves.median(self.curves)


@dataclass(frozen=True)
class Report:
    tag: str  # export.EVAL_TAG or export.EPISODE_TAG: what every curve of the report shows
    bins: int
    groups: list[Group]
    speeds: list[curves.LearningSpeed]
    notes: list[str]
    provenances: list  # each run's `artifacts.provenance.Provenance`


def series(run: ExportedRun, tag: str) -> Series:
    return run.tests if tag == export.EVAL_TAG else run.returns


def grid_size(runs: Sequence[ExportedRun], tag: str) -> int:
    """Test evaluations: one point per evaluation (the most any run has, up to 200); training
    returns: 50 slices."""
    if tag == export.EVAL_TAG:
        return min(MAX_EVAL_BINS, max(series(run, tag).size for run in runs))
    return EPISODE_BINS


def _place(item: tuple[Setting, Sequence[ExportedRun]]) -> tuple:
    setting, members = item
    return (setting.game, kind_key(members[0].info.kind), setting.variant, setting.order)


def group_runs(
    runs: Sequence[ExportedRun], tag: str, bins: int, source: Callable
) -> tuple[list[Group], list[str]]:
    """(the groups by game, then replay kind in the paper's order, then variant name, then
    the varied values; a note on each run left out as a repeat of another's setting and seed)."""
    settings, notes = by_setting(runs, source)
    groups = []
    for setting, members in sorted(settings.items(), key=_place):
        rows = []
        for run in members:
            line = series(run, tag)
            rows.append(curves.binned(line.steps, line.values, run.info.total_steps, bins))
        seeds = tuple(run.info.seed for run in members)
        total_steps = max(run.info.total_steps for run in members)
        code = code_of(run.info.provenance for run in members)
        kind = members[0].info.kind
        groups.append(
            Group(setting.game, setting.name, kind, seeds, total_steps, np.array(rows), code)
        )
    return groups, notes


def choose_curves(runs: Sequence[ExportedRun], source) -> tuple[str, list[ExportedRun], list[str]]:
    """(the tag every curve shows, the runs that have it, a note on each run left out, named by
    `source(info)`). The curve is the test evaluation when any run has one, else the training
    return: no plot mixes test scores with training returns."""
    has_tests = any(run.tests.size for run in runs)
    tag = export.EVAL_TAG if has_tests else export.EPISODE_TAG
    shown = [run for run in runs if series(run, tag).size]
    notes = [
        f"{source(run.info)}: no `{tag}` scalars, left out"
        for run in runs
        if not series(run, tag).size
    ]
    return tag, shown, notes


def build_report(runs: Sequence[ExportedRun], source: Callable) -> Report:
    """The report over exported Atari `runs`, each named in notes by `source(info)`; a
    ValueError where none has scalars to report."""
    tag, shown, notes = choose_curves(runs, source)
    if not shown:
        raise ValueError(f"no Atari run has scalars to report ({'; '.join(notes)})")
    bins = grid_size(shown, tag)
    groups, repeats = group_runs(shown, tag, bins, source)
    medians = {(group.game, group.name): group.median for group in groups}
    random_scores = {group.game: reference_scores(group.game, "noop")[0] for group in groups}
    speeds = curves.learning_speed(medians, random_scores)
    provenances = [run.info.provenance for run in shown]
    return Report(tag, bins, groups, speeds, notes + repeats, provenances)


def game_rows(report: Report) -> list[str]:
    """One markdown row per game and setting (see `markdown` for the columns)."""
    uniform_best = {g.game: np.nanmax(g.median) for g in report.groups if g.name == curves.UNIFORM}
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
            group.name,
            str(len(group.seeds)),
            format_score(final),
            format_score(best),
            *map(format_percent, (*human, versus, reaches)),
            group.code,
        ]
        rows.append(markdown_row(cells))
    return rows


def speed_rows(report: Report) -> list[str]:
    return [
        f"| {s.variant} | {s.games} | {format_percent(s.best_so_far[-1])} | "
        f"{format_percent(s.best_equivalence)} | {format_percent(s.mean_so_far[-1])} | "
        f"{format_percent(s.mean_equivalence)} |"
        for s in report.speeds
    ]


def markdown(report: Report, shown_as: str, figures: Sequence[str]) -> str:
    """report.md; `shown_as` names the directories reported."""
    source = (
        "test evaluations (`eval/score`, no-op starts, ε 0.01)"
        if report.tag == export.EVAL_TAG
        else "training episode returns (`episode/return`: no test evaluation was logged)"
    )
    seeds = sorted({len(g.seeds) for g in report.groups})
    lines = [
        f"# Sweep report: {shown_as}",
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
        "best, human-norm. | best vs uniform | reaches uniform's best at | code |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *game_rows(report),
        "",
        "*variant*: the replay kind and what else differs from the paper "
        "(`artifacts.run_directory.variant_name`), then `key=value` for each setting whose "
        "value differs between that variant's runs of the game: only runs that differ in their "
        "seed alone "
        "are pooled. *final*: median over seeds of the last point; *best*: median over seeds "
        "of each seed's best point; *best vs uniform* and *reaches …*: the median curve's "
        "best so far, and the first fraction of training where it matches the uniform "
        "median's best. "
        "*code*: the commits that ran its runs (see Code below).",
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
    ]
    return "\n".join([*lines, report_end(figures, report.provenances, report.notes)])


def plot_learning_curves(groups: Sequence[Group], bins: int, ylabel: str, path: Path) -> None:
    """One game: each variant's median over seeds with its interquartile band; the no-op
    human score dashed green."""
    game = resolve_game(groups[0].game)
    figure = Figure(figsize=(6, 4), dpi=100)
    axes = figure.subplots()
    colours = variant_colours([(group.name, group.kind) for group in groups])
    for group in groups:
        steps = curves.fractions(bins) * group.total_steps
        low, median, high = curves.quartiles(group.curves)
        colour = colours[group.name]
        legend = f"{label(group.name)} ({len(group.seeds)} seeds)"
        axes.plot(steps, median, color=colour, label=legend, linewidth=1.5)
        axes.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0)
    _, human = reference_scores(game.rom_id, "noop")
    axes.axhline(human, color="green", linestyle="--", linewidth=1, label="human")
    axes.set_title(game.name)
    axes.set_xlabel("agent steps")
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)


def plot_learning_speed(report: Report, path: Path) -> None:
    """Figure 4: median over games of the baseline-normalized best-so-far (left) and
    mean-so-far (right) scores against the fraction of training, equivalence points dashed."""
    figure = Figure(figsize=(10, 4), dpi=100)
    panels = figure.subplots(1, 2, sharey=True)
    x = 100 * curves.fractions(report.bins)
    kinds = {group.name: group.kind for group in report.groups}
    colours = variant_colours([(speed.variant, kinds[speed.variant]) for speed in report.speeds])
    for axes, field, title in (
        (panels[0], "best", "maximum score so far"),
        (panels[1], "mean", "mean score so far"),
    ):
        for speed in report.speeds:
            curve = getattr(speed, f"{field}_so_far")
            point = getattr(speed, f"{field}_equivalence")
            colour = colours[speed.variant]
            reached = f" (100 % at {100 * point:.0f} %)" if point is not None else ""
            axes.plot(x, 100 * curve, color=colour, label=label(speed.variant) + reached)
            if point is not None and speed.variant != curves.UNIFORM:
                axes.axvline(100 * point, color=colour, linestyle="--", linewidth=1)
        axes.axhline(100, color="grey", linewidth=0.8)
        axes.set_title(
            f"{title} (median over {max(s.games for s in report.speeds)} games)", fontsize=10
        )
        axes.set_xlabel("training (%)")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    panels[0].set_ylabel("baseline-normalized score (%)")
    figure.tight_layout()
    figure.savefig(path)


def plot_all(report: Report, out: Path) -> list[str]:
    """Writes every figure into `out`; returns their file names."""
    names = []
    tests = report.tag == export.EVAL_TAG
    ylabel = "test score (no-op starts)" if tests else "training return"
    for game in sorted({g.game for g in report.groups}):
        name = f"learning_curves_{game}.png"
        plot_learning_curves(
            [g for g in report.groups if g.game == game], report.bins, ylabel, out / name
        )
        names.append(name)
    if report.speeds:
        plot_learning_speed(report, out / "learning_speed.png")
        names.append("learning_speed.png")
    return names
