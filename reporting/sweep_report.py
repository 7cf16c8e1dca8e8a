"""Report over Hydra multirun directories of train.py runs.

    python -m reporting multirun/2026-01-01_00-00-00 --out reports/sweep
    python -m reporting multirun/alpha results/minatar/seaquest/dqn-proportional --out reports/alpha

Finds every run below the directories (its config.yaml and tensorboard/, or an exported run's
files), exports them into a scratch directory and reports them together, one row per game and
setting (`report.Group`: the variant and what else tells its runs apart), so that only seeds
are pooled as seeds. Atari runs: OUT/report.md (per game and setting the statistics over seeds,
the Figure 4 learning-speed summary), one learning_curves_<game>.png per game (median and
interquartile range over seeds, Figure 8) and learning_speed.png (Figure 4). MinAtar runs: the
MinAtar report (`python -m reporting minatar`), into OUT/minatar/ beside Atari runs, else OUT.
"""

import functools
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envs.games import resolve_game
from evaluation.scores import reference_scores
from reporting import curves, export, minatar, report
from reporting.results import ATARI_FAMILY, ExportedRun, read_runs

MAX_EVAL_BINS = 200  # the paper's 200M frames hold 200 test evaluations
EPISODE_BINS = 50  # training returns are irregular and noisy: average them over 2 % slices


@dataclass(frozen=True)
class Curves:
    """A group's runs on the common grid: one row per run, by seed, NaN where a run had not
    trained (an unfinished run) or logged nothing yet."""

    group: report.Group
    rows: np.ndarray  # runs × bins

    @property
    def median(self) -> np.ndarray:
        return curves.median(self.rows)


def game_rows(rows: Sequence[Curves]) -> list[str]:
    """One markdown row per game and setting (columns in `atari_report`)."""
    uniform_best = {
        r.group.game: np.nanmax(r.median) for r in rows if r.group.name == curves.UNIFORM
    }
    lines = []
    for row in rows:
        group = row.group
        random_score, human_score = reference_scores(group.game, "noop")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no run reached the end: NaN
            final = float(np.nanmedian(row.rows[:, -1]))
            best = float(np.nanmedian(np.nanmax(row.rows, axis=1)))
        human = [curves.normalized(v, random_score, human_score) for v in (final, best)]
        baseline = uniform_best.get(group.game)
        versus, reaches = None, None
        if baseline is not None and abs(baseline - random_score) > 1e-9:
            best_so_far = curves.normalized(curves.running_max(row.median), random_score, baseline)
            versus, reaches = best_so_far[-1], curves.equivalence_point(best_so_far)
        seeds = f"{len(group.runs)}{report.unfinished_mark(group.runs)}"
        cells = [
            resolve_game(group.game).name,
            group.name,
            seeds,
            *map(report.format_score, (final, best)),
        ]
        percents = map(report.format_percent, (*human, versus, reaches))
        lines.append(report.markdown_row([*cells, *percents, group.code]))
    return lines


def plot_learning_curves(rows: Sequence[Curves], bins: int, ylabel: str, path: Path) -> None:
    """One game: each setting's median over seeds with its interquartile band; the no-op
    human score dashed green."""
    game = resolve_game(rows[0].group.game)
    figure, panel = report.axes(6, 4)
    colours = report.variant_colours([(row.group.name, row.group.kind) for row in rows])
    for row in rows:
        steps = curves.fractions(bins) * max(run.info.total_steps for run in row.group.runs)
        low, median, high = curves.quartiles(row.rows)
        colour, legend = (
            colours[row.group.name],
            f"{report.label(row.group.name)} ({len(row.rows)} seeds)",
        )
        panel.plot(steps, median, color=colour, label=legend, linewidth=1.5)
        panel.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0)
    panel.axhline(
        reference_scores(game.rom_id, "noop")[1],
        color="green",
        linestyle="--",
        linewidth=1,
        label="human",
    )
    report.finish(panel, game.name, "agent steps", ylabel, 8)
    report.save(figure, path)


def plot_learning_speed(speeds: Sequence[curves.LearningSpeed], kinds, bins: int, path) -> None:
    """Figure 4: median over games of the baseline-normalized best-so-far (left) and
    mean-so-far (right) scores against the fraction of training, equivalence points dashed;
    `kinds`: each variant's replay kind."""
    figure, panels = report.axes(10, 4, ncols=2, sharey=True)
    colours = report.variant_colours([(speed.variant, kinds[speed.variant]) for speed in speeds])
    for panel, field, title in ((panels[0], "best", "maximum"), (panels[1], "mean", "mean")):
        for speed in speeds:
            point, colour = getattr(speed, f"{field}_equivalence"), colours[speed.variant]
            reached = f" (100 % at {100 * point:.0f} %)" if point is not None else ""
            curve = 100 * getattr(speed, f"{field}_so_far")
            panel.plot(
                100 * curves.fractions(bins),
                curve,
                color=colour,
                label=report.label(speed.variant) + reached,
            )
            if point is not None and speed.variant != curves.UNIFORM:
                panel.axvline(100 * point, color=colour, linestyle="--", linewidth=1)
        panel.axhline(100, color="grey", linewidth=0.8)
        report.finish(panel, "", "training (%)", None, 8)
        games = max(speed.games for speed in speeds)
        panel.set_title(f"{title} score so far (median over {games} games)", fontsize=10)
    panels[0].set_ylabel("baseline-normalized score (%)")
    report.save(figure, path)


def atari_report(runs: Sequence[ExportedRun], shown_as: str, notes: list[str]) -> tuple:
    """(report.md's text, its figures: file name -> what draws it) over exported Atari `runs`;
    a ValueError where none has scalars to report. The curve is the test evaluation when any
    run has one, else the training return: no plot mixes test scores with training returns.
    Test evaluations are on one point per evaluation (the most any run has, up to 200),
    training returns on 50 slices (`curves`)."""
    tests = any(run.tests.size for run in runs)
    tag = export.EVAL_TAG if tests else export.EPISODE_TAG

    def series(run: ExportedRun):
        return run.tests if tests else run.returns

    shown = [run for run in runs if series(run).size]
    left = [f"{run.name}: no `{tag}` scalars, left out" for run in runs if run not in shown]
    if not shown:
        raise ValueError(f"no Atari run has scalars to report ({'; '.join(left)})")
    groups, repeats = report.by_setting(shown)
    bins = min(MAX_EVAL_BINS, max(series(run).size for run in shown)) if tests else EPISODE_BINS

    def grid(run: ExportedRun) -> np.ndarray:
        line = series(run)
        return curves.binned(line.steps, line.values, run.info.total_steps, bins, run.steps)

    rows = [
        Curves(g, np.array([grid(run) for run in g.runs]))
        for g in sorted(groups, key=lambda g: g.order)
    ]
    medians = {(row.group.game, row.group.name): row.median for row in rows}
    random_scores = {row.group.game: reference_scores(row.group.game, "noop")[0] for row in rows}
    speeds = curves.learning_speed(medians, random_scores)
    ylabel = "test score (no-op starts)" if tests else "training return"
    figures = {
        f"learning_curves_{game}.png": functools.partial(
            plot_learning_curves, [row for row in rows if row.group.game == game], bins, ylabel
        )
        for game in sorted({row.group.game for row in rows})
    }
    if speeds:
        kinds = {row.group.name: row.group.kind for row in rows}
        figures["learning_speed.png"] = functools.partial(plot_learning_speed, speeds, kinds, bins)
    source = (
        "test evaluations (`eval/score`, no-op starts, ε 0.01)"
        if tests
        else "training episode returns (`episode/return`: no test evaluation was logged)"
    )
    seeds = "/".join(map(str, sorted({len(row.group.runs) for row in rows})))
    intro = (
        f"; {seeds} seeds each; scores are {source}, on {bins} points per run (fractions of its "
        "training).\nHuman-normalized: (score − random) / |human − random| with the no-op "
        "reference scores; *vs uniform*: the same with the best score of the uniform median "
        "curve as reference (the paper's Figure 4 baseline)."
    )
    body = [
        "## Per game",
        "",
        *report.table(
            "game | variant | seeds | final score | best score | final, human-norm. | "
            "best, human-norm. | best vs uniform | reaches uniform's best at | code",
            game_rows(rows),
        ),
        "",
        "*variant*: the replay kind and what else differs from the paper "
        "(`artifacts.run_directory.variant_name`), then `key=value` for each setting that tells "
        "that variant's runs of the game apart: only runs that differ in their seed alone are "
        "pooled. *seeds*: how many, and how many of them had not finished (their curves end "
        "where they stopped; see Unfinished runs). *final*: median over the seeds that reached "
        "the last point; *best*: median over seeds of each seed's best point; *best vs uniform* "
        "and *reaches …*: the median curve's best so far, and the first fraction of training "
        "where it matches the uniform median's best. *code*: the commits that ran its runs "
        "(see Code below).",
        "",
        "## Learning speed (Figure 4)",
        "",
        "Median over games of the baseline-normalized best-so-far score (left panel) and "
        "mean-so-far score (right panel; baseline: the uniform median's mean over training); "
        "*reaches 100 %* is the fraction of training where a variant matches uniform Double "
        "DQN (the paper: 47 % rank-based, 38 % proportional on the left; 41 %, 43 % right).",
        "",
        *report.table(
            "variant | games | best so far, at the end | reaches 100 % | mean so far, at the end "
            "| reaches 100 %",
            [
                report.markdown_row(
                    [
                        s.variant,
                        str(s.games),
                        *map(
                            report.format_percent,
                            (
                                s.best_so_far[-1],
                                s.best_equivalence,
                                s.mean_so_far[-1],
                                s.mean_equivalence,
                            ),
                        ),
                    ]
                )
                for s in speeds
            ]
            or ["| – | no game has a uniform baseline | | | | |"],
        ),
        "",
    ]
    groups = [row.group for row in rows]
    text = report.document(
        f"Sweep report: {shown_as}", intro, groups, body, figures, left + repeats + notes
    )
    return text, figures


def build(directories: Sequence[Path], out: Path) -> Path:
    """The sweep report over the runs below `directories` into `out` (see the module's
    docstring); returns its report.md. Its refusals are one-line ValueErrors, made before
    anything is written."""
    shown_as = ", ".join(f"`{directory}`" for directory in directories)
    family = minatar.FAMILY
    with tempfile.TemporaryDirectory(prefix="sweep_export_") as scratch:
        sources, strays = export.export_scratch(directories, Path(scratch))
        atari, others, _ = read_runs(Path(scratch), ATARI_FAMILY, sources)
        if not atari and family in others:
            return minatar.build(
                Path(scratch), out, shown_as=shown_as, sources=sources, notes=strays
            )
        if not atari:
            raise ValueError(f"{shown_as}: no Atari or MinAtar run to report")
        notes = [
            f"{n} {name} run(s) left out: no report for them"
            for name, n in others.items()
            if name != family
        ]
        beside = None
        if family in others:
            try:
                beside = minatar.prepare(Path(scratch), shown_as, sources, name_others=False)
                notes.append(
                    f"{others[family]} {family} run(s): not Atari, reported in {family}/report.md"
                )
            except ValueError:
                none = "none has a training episode to report"
                notes.append(f"{others[family]} {family} run(s) left out: {none}")
        text, figures = atari_report(atari, shown_as, strays + notes)
        if beside is not None:
            report.write_report(out / family, *beside)
        return report.write_report(out, text, figures, strays + notes)
