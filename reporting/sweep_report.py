"""Report over Hydra multirun directories of train.py runs.

    python -m reporting multirun/2026-01-01_00-00-00 --out reports/sweep
    python -m reporting multirun/alpha results/minatar/seaquest/dqn-proportional --out reports/alpha

Reads every run below the directories (a run directory or an export) as `export` would and
reports them together, a row per game and setting (the variant, and what else tells its runs
apart): only seeds are pooled. Atari runs: OUT/report.md (per game and setting the statistics
over seeds, the Figure 4 learning-speed summary), learning_curves_<game>.png (median and
interquartile range over seeds, Figure 8) and learning_speed.png (Figure 4). MinAtar runs: the
MinAtar report (`python -m reporting minatar`), into OUT/minatar/ beside Atari runs, else OUT.
"""

import functools
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from envs.games import resolve_game
from evaluation.scores import reference_scores
from reporting import curves, export, minatar, report
from reporting.results import ATARI_FAMILY, EVALUATIONS, TRAINING_RETURNS, ExportedRun

MAX_EVAL_BINS = 200  # the paper's 200M frames hold 200 test evaluations
EPISODE_BINS = 50  # training returns are irregular and noisy: average them over 2 % slices
Rows = tuple[report.Group, np.ndarray]  # a group, and its runs on the grid: runs × bins


def game_rows(rows: Sequence[Rows]) -> list[str]:
    """A markdown row per game and setting (columns in `atari_report`)."""
    uniform = {g.game: np.nanmax(curves.median(r)) for g, r in rows if g.name == curves.UNIFORM}
    lines = []
    for group, runs in rows:
        random_score, human_score = reference_scores(group.game, "noop")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no run reached the end: NaN
            final, best = (float(np.nanmedian(v)) for v in (runs[:, -1], np.nanmax(runs, axis=1)))
        human = [curves.normalized(v, random_score, human_score) for v in (final, best)]
        baseline, versus, reaches = uniform.get(group.game), None, None
        if baseline is not None and abs(baseline - random_score) > 1e-9:
            best_so_far = curves.running_max(curves.median(runs))
            so_far = curves.normalized(best_so_far, random_score, baseline)
            versus, reaches = so_far[-1], curves.equivalence_point(so_far)
        seeds = f"{len(group.runs)}{report.unfinished_mark(group.runs)}"
        scores = map(report.format_score, (final, best))
        percents = map(report.format_percent, (*human, versus, reaches))
        cells = [resolve_game(group.game).name, group.name, seeds, *scores, *percents, group.code]
        lines.append(report.markdown_row(cells))
    return lines


def plot_learning_curves(rows: Sequence[Rows], bins: int, ylabel: str, path: Path) -> None:
    """One game: each setting's median over seeds with its interquartile band; the no-op
    human score dashed green."""
    game = resolve_game(rows[0][0].game)
    figure, panel = report.axes(6, 4)
    colours = report.variant_colours([(group.name, group.kind) for group, _ in rows])
    for group, runs in rows:
        steps = curves.fractions(bins) * max(run.info.total_steps for run in group.runs)
        low, median, high = curves.quartiles(runs)
        legend = f"{report.label(group.name)} ({len(runs)} seeds)"
        panel.plot(steps, median, color=colours[group.name], label=legend, linewidth=1.5)
        panel.fill_between(steps, low, high, color=colours[group.name], alpha=0.2, linewidth=0)
    human = reference_scores(game.rom_id, "noop")[1]
    panel.axhline(human, color="green", linestyle="--", linewidth=1, label="human")
    report.finish(panel, game.name, "agent steps", ylabel, 8)
    report.save(figure, path)


def plot_learning_speed(speeds: Sequence[curves.LearningSpeed], kinds, bins: int, path) -> None:
    """Figure 4: median over games of the baseline-normalized best-so-far (left) and mean-so-far
    (right) scores against the fraction of training, equivalence points dashed."""
    figure, panels = report.axes(10, 4, ncols=2, sharey=True)
    colours = report.variant_colours([(speed.variant, kinds[speed.variant]) for speed in speeds])
    for panel, field, title in ((panels[0], "best", "maximum"), (panels[1], "mean", "mean")):
        for speed in speeds:
            point, colour = getattr(speed, f"{field}_equivalence"), colours[speed.variant]
            legend = report.label(speed.variant) + (
                f" (100 % at {100 * point:.0f} %)" if point is not None else ""
            )
            panel.plot(
                100 * curves.fractions(bins),
                100 * getattr(speed, f"{field}_so_far"),
                color=colour,
                label=legend,
            )
            if point is not None and speed.variant != curves.UNIFORM:
                panel.axvline(100 * point, color=colour, linestyle="--", linewidth=1)
        panel.axhline(100, color="grey", linewidth=0.8)
        report.finish(panel, "", "training (%)", None, 8)
        games = max(speed.games for speed in speeds)
        panel.set_title(f"{title} score so far (median over {games} games)", fontsize=10)
    panels[0].set_ylabel("baseline-normalized score (%)")
    report.save(figure, path)


PER_GAME_COLUMNS = (
    "game | variant | seeds | final score | best score | final, human-norm. | best, human-norm. "
    "| best vs uniform | reaches uniform's best at | code"
)
PER_GAME_NOTE = (
    "*variant*: the replay kind and what else differs from the paper "
    "(`artifacts.run_directory.variant_name`), then `key=value` for each setting that tells "
    "that variant's runs of the game apart: only runs that differ in their seed alone are "
    "pooled. *seeds*: how many, and how many of them had not finished (their curves end "
    "where they stopped; see Unfinished runs). *final*: median over the seeds that reached "
    "the last point; *best*: median over seeds of each seed's best point; *best vs uniform* "
    "and *reaches …*: the median curve's best so far, and the first fraction of training "
    "where it matches the uniform median's best. *code*: the commits that ran its runs "
    "(see Code below)."
)
SPEED_NOTE = (
    "Median over games of the baseline-normalized best-so-far score (left panel) and "
    "mean-so-far score (right panel; baseline: the uniform median's mean over training); "
    "*reaches 100 %* is the fraction of training where a variant matches uniform Double "
    "DQN (the paper: 47 % rank-based, 38 % proportional on the left; 41 %, 43 % right)."
)
SPEED_COLUMNS = (
    "variant | games | best so far, at the end | reaches 100 % | mean so far, at the end "
    "| reaches 100 %"
)


def speed_rows(speeds: Sequence[curves.LearningSpeed]) -> list[str]:
    """A markdown row per variant of Figure 4's summary (columns: SPEED_COLUMNS)."""
    if not speeds:
        return ["| – | no game has a uniform baseline | | | | |"]
    rows = []
    for s in speeds:
        ends = (s.best_so_far[-1], s.best_equivalence, s.mean_so_far[-1], s.mean_equivalence)
        rows.append(
            report.markdown_row([s.variant, str(s.games), *map(report.format_percent, ends)])
        )
    return rows


def curve_figures(rows: Sequence[Rows], speeds, bins: int, ylabel: str) -> dict:
    """The report's figures: file name -> what draws it (a game's curves, Figure 4)."""
    figures = {}
    for game in sorted({group.game for group, _ in rows}):
        ours = [row for row in rows if row[0].game == game]
        figures[f"learning_curves_{game}.png"] = functools.partial(
            plot_learning_curves, ours, bins, ylabel
        )
    if speeds:
        kinds = {group.name: group.kind for group, _ in rows}
        figures["learning_speed.png"] = functools.partial(plot_learning_speed, speeds, kinds, bins)
    return figures


def atari_report(runs: Sequence[ExportedRun], shown_as: str, notes: list[str]) -> tuple:
    """(report.md's text, its figures: file name -> what draws it) over exported Atari `runs`;
    a ValueError where none has scalars to report. The curve is the test evaluation when any
    run has one (on one point per evaluation: the most any run has, up to 200), else the
    training return (on 50 slices): no plot mixes test scores with training returns."""
    tests = any(run.tests is not None and run.tests.size for run in runs)
    tag, file = (export.EVAL_TAG, EVALUATIONS) if tests else (export.EPISODE_TAG, TRAINING_RETURNS)
    shown, left = report.with_scores(
        runs, "tests" if tests else "returns", file, f"`{tag}` scalars"
    )
    if not shown:
        raise ValueError(f"no Atari run has scalars to report ({'; '.join(left)})")
    groups, repeats = report.by_setting(shown)
    bins = min(MAX_EVAL_BINS, max(run.tests.size for run in shown)) if tests else EPISODE_BINS

    def grid(run: ExportedRun) -> np.ndarray:
        line = run.tests if tests else run.returns
        return curves.binned(line.steps, line.values, run.info.total_steps, bins, run.steps)

    rows = [
        (g, np.array([grid(run) for run in g.runs])) for g in sorted(groups, key=lambda g: g.order)
    ]
    medians = {(group.game, group.name): curves.median(runs) for group, runs in rows}
    random_scores = {game: reference_scores(game, "noop")[0] for game, _ in medians}
    speeds = curves.learning_speed(medians, random_scores)
    ylabel = "test score (no-op starts)" if tests else "training return"
    figures = curve_figures(rows, speeds, bins, ylabel)
    source = (
        "test evaluations (`eval/score`, no-op starts, ε 0.01)"
        if tests
        else "training episode returns (`episode/return`: no test evaluation was logged)"
    )
    seeds = "/".join(map(str, sorted({len(group.runs) for group, _ in rows})))
    intro = (
        f"; {seeds} seeds each; scores are {source}, on {bins} points per run (fractions of its "
        "training).\nHuman-normalized: (score − random) / |human − random| with the no-op "
        "reference scores; *vs uniform*: the same with the best score of the uniform median "
        "curve as reference (the paper's Figure 4 baseline)."
    )
    body = [
        "## Per game",
        "",
        *report.table(PER_GAME_COLUMNS, game_rows(rows)),
        "",
        PER_GAME_NOTE,
        "",
        "## Learning speed (Figure 4)",
        "",
        SPEED_NOTE,
        "",
        *report.table(SPEED_COLUMNS, speed_rows(speeds)),
        "",
    ]
    title, groups = f"Sweep report: {shown_as}", [group for group, _ in rows]
    return report.document(title, intro, groups, body, figures, left + repeats + notes), figures


def build(directories: Sequence[Path], out: Path) -> Path:
    """The sweep report over the runs below `directories` into `out` (see the module's
    docstring); returns its report.md. Its refusals are one-line ValueErrors, made before
    anything is written."""
    shown_as = ", ".join(f"`{directory}`" for directory in directories)
    runs, notes = export.collect(directories)
    families: dict[str, list[ExportedRun]] = {}
    for run in runs:
        families.setdefault(run.info.family, []).append(run)
    atari, family = families.pop(ATARI_FAMILY, []), minatar.FAMILY
    theirs = families.pop(family, [])
    if not atari and theirs:
        return report.write_report(out, *minatar.prepare(theirs, notes, shown_as, shown_as))
    if not atari:
        raise ValueError(f"{shown_as}: no Atari or MinAtar run to report")
    notes += [
        f"{len(members)} {name} run(s) left out: no report for them"
        for name, members in sorted(families.items())
    ]
    beside = None
    if theirs:
        try:
            beside = minatar.prepare(theirs, [], shown_as, shown_as)
            notes.append(
                f"{len(theirs)} {family} run(s): not Atari, reported in {family}/report.md"
            )
        except ValueError:
            notes.append(
                f"{len(theirs)} {family} run(s) left out: none has a training episode to report"
            )
    text, figures = atari_report(atari, shown_as, notes)
    if beside is not None:
        report.write_report(out / family, *beside)
    return report.write_report(out, text, figures, notes)
