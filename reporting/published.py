"""Exported results beside Dopamine's published DQN and Rainbow curves.

    python -m reporting published results --out results/report

Reads the exported Atari runs and writes into OUT, per game and budget,
published_<game>_<budget>.png (each setting's periodic-test score against frames, median and
min–max over runs, with Dopamine's curves) and training_<game>_<budget>.png (the mean training
return per 1M-frame iteration, the measure Dopamine published), and report.md (per game and
setting, the test score at the last frame count all its runs share, the training return of
the last iteration all completed; per run, its evaluation by `python evaluate.py RUN_DIR`,
where it has one). A setting is a variant and what else tells its runs apart (a budget, a β
schedule): only seeds are pooled. Dopamine's curves are training returns under another
protocol (reporting/data/README.md): a reference for the order of magnitude only.
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envs.games import resolve_game
from evaluation.scores import data_rows, normalized_score, reference_scores
from reporting import report, results
from reporting.results import ExportedRun, count_name

NOOP = "noop"  # evaluate.py's default protocol, whose reference scores the report uses
DOPAMINE_CSV = "dopamine_baselines_training_returns.csv"
DOPAMINE_AGENTS = ("DQN", "Rainbow")
ITERATION_FRAMES = 1_000_000  # Dopamine's iteration: its curves' points are 1M frames apart


@dataclass(frozen=True)
class Band:
    """A curve against frames: the median and the min–max range over runs."""

    frames: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def until(self, frames: int) -> "Band":
        keep = self.frames <= frames
        return Band(self.frames[keep], self.median[keep], self.low[keep], self.high[keep])

    def cell(self, index: int) -> str:
        return report.format_interval(self.median[index], self.low[index], self.high[index])


@functools.cache
def dopamine_curves() -> dict[tuple[str, str], Band]:
    """(ROM id, agent) -> Dopamine's curve; its game names (`mspacman`) resolve like ours."""
    rows: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    columns = ("frames", "median_return", "min_return", "max_return")
    for row in data_rows(DOPAMINE_CSV, "reporting"):
        key = (resolve_game(row["game"]).rom_id, row["agent"])
        rows.setdefault(key, []).append(tuple(float(row[column]) for column in columns))
    return {key: Band(*np.array(sorted(points)).T) for key, points in rows.items()}


def band_over(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> Band:
    """(frames, values) curves -> their band over the union of their frame counts, each point
    over the curves that have it."""
    frames = np.unique(np.concatenate([f for f, _ in curves]))
    points = [[v[f == at][0] for f, v in curves if at in f] for at in frames]
    return Band(frames, *(np.array([op(p) for p in points]) for op in (np.median, np.min, np.max)))


def iteration_means(frames: np.ndarray, returns: np.ndarray, trained_frames: int) -> tuple:
    """(k·I, mean return of the training episodes that ended in ((k − 1)·I, k·I]) for each
    iteration k of I = 1M frames that the run completed (k·I ≤ `trained_frames`) and in which
    an episode ended: Dopamine's measure, an episode counted in the iteration it ends in."""
    iteration = -(-np.asarray(frames) // ITERATION_FRAMES)  # ceil: an end at k·I is in k
    complete = np.arange(1, trained_frames // ITERATION_FRAMES + 1)
    present = complete[np.isin(complete, iteration)]
    means = np.array([np.mean(returns[iteration == k]) for k in present])
    return present * ITERATION_FRAMES, means


def dopamine_at(game: str, frames: int) -> tuple[int | None, dict[str, Band]]:
    """(Dopamine's last frame count ≤ `frames`, each agent's curve up to it); (None, {}) for a
    game Dopamine did not publish or a run shorter than its first point."""
    published = {agent: dopamine_curves().get((game, agent)) for agent in DOPAMINE_AGENTS}
    curves = {agent: band.until(frames) for agent, band in published.items() if band is not None}
    curves = {agent: band for agent, band in curves.items() if band.frames.size}
    last = max((int(band.frames[-1]) for band in curves.values()), default=None)
    return last, curves


@dataclass(frozen=True)
class Variant:
    """A group of runs, each with a periodic test: their band over the union of their test
    frame counts (each point over the runs tested there), the last frame count all share, and
    the band of their training returns per iteration (None before the first)."""

    group: report.Group
    band: Band
    shared: int | None
    training: Band | None

    @property
    def name(self) -> str:
        """The group's setting but its budget, which has its own column and legend."""
        return self.group.named((report.BUDGET_KEY,))

    @property
    def budget(self) -> str:
        return count_name(self.group.runs[0].info.total_frames)

    @property
    def key(self) -> str:
        """Its name with its budget: a variant at two budgets is two experiments."""
        return f"{self.name} {self.budget}"


def first_start(run: ExportedRun) -> str:
    """When the run first started (ISO 8601, UTC), "" where unrecorded."""
    starts = run.info.provenance.starts
    return str(starts[0].get("time") or "") if starts else ""


def variant_colours(variants: Sequence[Variant]) -> dict[str, str]:
    """`Variant.key` -> colour (`report.variant_colours`): of the variants at the paper's
    settings, the longest budget's newest claims the paper's colour, not a shorter or older one."""

    def claim(v: Variant) -> tuple:
        return v.group.runs[0].info.total_frames, max(first_start(run) for run in v.group.runs)

    claims = sorted(variants, key=claim, reverse=True)
    return report.variant_colours([(v.key, v.group.kind) for v in claims])


def variant(group: report.Group) -> Variant:
    shared = functools.reduce(np.intersect1d, (run.tests.frames for run in group.runs))
    returns = [run for run in group.runs if run.returns is not None]
    iterations = [
        iteration_means(run.returns.frames, run.returns.values, run.trained_frames)
        for run in returns
    ]
    iterations = [curve for curve in iterations if curve[0].size]
    band = band_over([(run.tests.frames, run.tests.values) for run in group.runs])
    last_shared = int(shared[-1]) if shared.size else None
    return Variant(group, band, last_shared, band_over(iterations) if iterations else None)


def variant_row(variant: Variant) -> str:
    """One row of the score table (columns in `markdown`)."""
    game, runs, info = variant.group.game, variant.group.runs, variant.group.runs[0].info
    seeds = ", ".join(f"{run.info.seed}{'' if run.finished else ': unfinished'}" for run in runs)
    budget = f"{count_name(info.total_frames)} frames ({count_name(info.total_steps)} steps)"
    random_human = [report.format_score(value) for value in reference_scores(game, "noop")]
    cells = [resolve_game(game).name, variant.name, f"{len(runs)} ({seeds})", budget]
    if variant.shared is None:
        cells += ["–", "–", *random_human, "–", "–", "–", "–"]
    else:
        index = int(np.flatnonzero(variant.band.frames == variant.shared)[0])
        at, references = dopamine_at(game, variant.shared)
        cells += [
            count_name(variant.shared),
            variant.band.cell(index),
            *random_human,
            report.format_percent(normalized_score(variant.band.median[index], game, "noop")),
            "–" if at is None else count_name(at),
            *(references[a].cell(-1) if a in references else "–" for a in DOPAMINE_AGENTS),
        ]
    return report.markdown_row([*cells, variant.group.code])


def training_row(variant: Variant) -> str:
    """One row of the training-return table: at the last iteration every run completed."""
    game, runs, iteration = variant.group.game, variant.group.runs, ITERATION_FRAMES
    trained = [f"{r.trained_frames / 1e6:.2f}M of {count_name(r.info.total_frames)}" for r in runs]
    cells = [resolve_game(game).name, variant.name, str(len(runs)), ", ".join(trained)]
    at = min(run.trained_frames // iteration * iteration for run in runs)
    if variant.training is None or at not in variant.training.frames:
        return report.markdown_row(cells + ["–"] * (2 + len(DOPAMINE_AGENTS)))
    references = dopamine_at(game, at)[1]
    cells += [
        count_name(at),
        variant.training.cell(int(np.flatnonzero(variant.training.frames == at)[0])),
    ]
    for agent in DOPAMINE_AGENTS:
        ours = agent in references and references[agent].frames[-1] == at
        cells.append(references[agent].cell(-1) if ours else "–")
    return report.markdown_row(cells)


def evaluation_row(variant: Variant, run: ExportedRun) -> str:
    """One row of the table of evaluations after training: `run`, of `variant`."""
    info, evaluated = run.info, run.evaluation(NOOP)
    cells = [resolve_game(info.game).name, variant.name, str(info.seed)]
    cells.append(f"{count_name(info.total_frames)} frames")
    if evaluated is None:
        return report.markdown_row([*cells, "not evaluated", "–", "–", "–", "–"])
    score = evaluated.score
    cells += [f"{evaluated.snapshot}, {count_name(score.frames)} frames", str(score.episodes)]
    cells.append("–" if score.epsilon is None else f"{score.epsilon:g}")
    score_cells = [
        report.format_mean_error(score.mean, score.std),
        report.format_percent(score.normalized),
    ]
    return report.markdown_row(cells + score_cells)


def markdown(variants: Sequence[Variant]) -> list[str]:
    """The report's own sections (`report.document` writes the rest)."""
    return [
        "*Dopamine DQN* and *Rainbow*: the curves google/dopamine published, at their last "
        "point at or before *frames* (*Dopamine at*), median [min, max] over 5 runs. They are "
        "average **training** returns per 1M-frame iteration with sticky actions (p = 0.25) and "
        "no no-op starts: a reference for the order of magnitude a correct agent reaches, not a "
        "target (reporting/data/README.md). Dopamine published 10 games; – for the others. "
        "*code*: the commits that ran the variant's runs (see Code below).",
        "",
        *report.table(
            "game | variant | runs (seeds) | budget per run | frames | score | random | human | "
            "normalized | Dopamine at | Dopamine DQN | Dopamine Rainbow | code",
            map(variant_row, variants),
        ),
        "",
        "## Evaluation after training",
        "",
        "`python evaluate.py RUN_DIR` on the run's snapshot (*snapshot*: the agent of its best "
        "periodic test or its latest one, and the frames it had trained), with no-op starts "
        "(1–30 random no-ops; by default 30 episodes, ε 0.01); exported with the run "
        f"(`evaluation_{NOOP}.json`). *Score*: the mean over the episodes ± their standard "
        "deviation; *normalized*: (mean − random) / |human − random| with the no-op reference "
        "scores, as evaluate.py computed it. *not evaluated*: the run has no such report.",
        "",
        *report.table(
            "game | variant | seed | budget | snapshot | episodes | ε | score | normalized",
            (evaluation_row(variant, run) for variant in variants for run in variant.group.runs),
        ),
        "",
        "## Training returns",
        "",
        "The measure Dopamine published: the mean return of the training episodes that ended "
        "in each 1M-frame iteration (unclipped, whole games). *Iteration*: the last one every "
        "run of the variant completed, ending at that frame count; median [min, max] over the "
        "runs, and Dopamine's at the same iteration. Our training ε is the paper's (1 until "
        "learning starts, then linear to 0.01 by 1M agent steps later, 4.2M frames); "
        "Dopamine's DQN reaches 0.01 by 1M frames, so before 4.2M frames our returns are "
        "played with more random actions.",
        "",
        *report.table(
            "game | variant | runs | frames trained | iteration | training return | "
            "Dopamine DQN | Dopamine Rainbow",
            map(training_row, variants),
        ),
        "",
    ]


def plot_game(variants, bands, path: Path, references: Mapping[str, Band], title: str) -> None:
    """One game at one budget: each variant's band (median, min–max over runs) of `bands` and
    Dopamine's published curves dashed, against frames."""
    figure, panel = report.axes(7, 4.5)

    def draw(band: Band, colour: str, legend: str, **line) -> None:
        millions = band.frames / 1e6
        panel.plot(millions, band.median, color=colour, label=legend, linewidth=1.5, **line)
        panel.fill_between(millions, band.low, band.high, color=colour, alpha=0.15, linewidth=0)

    colours = variant_colours(variants)
    for variant, band in zip(variants, bands, strict=True):
        count = len(variant.group.runs)
        unfinished = sum(not run.finished for run in variant.group.runs)
        runs = f"{count} run{'s' * (count != 1)}" + f", {unfinished} unfinished" * (unfinished > 0)
        if band is not None:
            legend = f"{report.label(variant.name)} ({runs})"
            draw(band, colours[variant.key], legend, marker=".")
    for agent, band in references.items():  # markers: a short run overlaps one Dopamine point
        legend = f"Dopamine {agent} (training returns, sticky actions; reference only)"
        draw(band, report.DOPAMINE_COLOURS[agent], legend, linestyle="--", marker="x")
    game = variants[0].group.game
    random_score = reference_scores(game, "noop")[0]
    panel.axhline(random_score, color="grey", linestyle=":", linewidth=1, label="random (no-op)")
    title = f"{resolve_game(game).name}, {variants[0].budget}-frame runs: {title}"
    ylabel = "score (median, min–max over runs)"
    # A see-through legend: points may lie behind it.
    report.finish(panel, title, "emulator frames (millions)", ylabel, framealpha=0.5)
    report.save(figure, path)


def build(results_dir: Path, out: Path) -> Path:
    """Writes the figures and report.md into `out`; returns report.md's path. Runs without a
    periodic test, and runs of other families (Dopamine published Atari games; the human
    reference scores are Atari's), are left out with a note."""
    runs, found = results.read_runs(results_dir, results.ATARI_FAMILY)
    tested, notes = report.with_scores(runs, "tests", results.EVALUATIONS, "periodic test")
    notes += found
    if not tested:
        detail = f" ({'; '.join(notes)})" if notes else ""
        raise ValueError(
            f"{results_dir} holds no exported run with a periodic test{detail}; "
            "export runs with: python -m reporting export RUN_DIR --out DIR"
        )
    groups, repeats = report.by_setting(tested)
    variants = [variant(group) for group in sorted(groups, key=lambda group: group.order)]
    figures = {}
    frames = sorted({(v.group.game, v.group.runs[0].info.total_frames) for v in variants})
    for game, budget in ((game, count_name(total)) for game, total in frames):
        # A figure per budget: a 2M-frame run's curve is lost among 10M-frame ones.
        ours = [v for v in variants if (v.group.game, v.budget) == (game, budget)]
        name = f"{game}_{budget}.png"
        references = dopamine_at(game, max(int(v.band.frames[-1]) for v in ours))[1]
        plot = functools.partial(plot_game, ours, references=references)
        tests, training = [v.band for v in ours], [v.training for v in ours]
        title = "periodic test (no-op starts)"
        figures[f"published_{name}"] = functools.partial(plot, tests, title=title)
        if any(band is not None for band in training):
            title = "training return per 1M-frame iteration"
            figures[f"training_{name}"] = functools.partial(plot, training, title=title)
    intro = (
        ". *Score*: the mean score of the periodic test (`eval/score`: no-op starts, ε-greedy, "
        "the run's `evaluation` settings) at *frames*, the last frame count at which every run "
        "of the variant was tested; median [min, max] over the runs. *Random* and *human*: the "
        "no-op reference scores; *normalized*: (median − random) / |human − random|."
    )
    title = f"Results beside published curves: `{results_dir}`"
    groups = [v.group for v in variants]
    text = report.document(title, intro, groups, markdown(variants), figures, notes + repeats)
    return report.write_report(out, text, figures, notes + repeats)
