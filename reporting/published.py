"""Exported results beside Dopamine's published DQN and Rainbow curves.

    python -m reporting published results --out results/report

Reads the Atari runs that `python -m reporting export` wrote (config.yaml, evaluations.csv)
and writes into OUT, per game, published_<game>.png (each replay variant's periodic-test score
against frames, median and min–max over runs, with Dopamine's curves over the same frames) and
training_<game>.png (each variant's mean training return per 1M-frame iteration, the measure
Dopamine published, beside its curves), and report.md (per game and variant, the test score at
the last frame count all its runs share, and the training return of the last iteration all its
runs completed; per run, its evaluation after training by `python evaluate.py RUN_DIR`, where
it has one: `reporting.evaluation_table`). Dopamine's curves are training returns under
another protocol (sticky actions, no no-op starts, ε at 0.01 after 1M frames;
reporting/data/README.md): a reference for the order of magnitude only.
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from artifacts.provenance import code_of
from envs.games import resolve_game
from evaluation.scores import normalized_score, reference_scores
from reporting.dopamine import (
    DOPAMINE_AGENTS,
    ITERATION_FRAMES,
    Band,
    band_over,
    dopamine_at,
    iteration_means,
)
from reporting.evaluation_table import evaluation_section
from reporting.markdown import format_percent, format_score, markdown_row, report_end
from reporting.plots import DOPAMINE_COLOURS, label, variant_colours
from reporting.results import (
    ATARI_FAMILY,
    EVALUATIONS,
    ExportedRun,
    by_variant,
    count_name,
    kind_key,
    read_results,
)


@dataclass(frozen=True)
class Variant:
    """The runs of one game and variant (`RunDirectory.variant`): their band over the union of
    their test frame counts (each point over the runs tested there), the last frame count
    all share, and the band of their training returns per iteration."""

    game: str
    name: str
    kind: str  # the replay kind of every run of the variant
    runs: tuple[ExportedRun, ...]  # each with at least one periodic test
    band: Band
    shared: int | None
    training: Band | None  # iteration means of the training returns; None before the first


def tested_runs(results_dir: Path) -> tuple[list[ExportedRun], list[str]]:
    """(the exported Atari runs with at least one periodic test, notes on the others). Runs of
    other families are left out with one note per family: Dopamine published Atari games, and
    the human reference scores are Atari's."""
    runs, others = read_results(results_dir, ATARI_FAMILY)
    tested, notes = [], []
    for run in runs:
        if run.tests is None:
            notes.append(f"{run.info.path}: no {EVALUATIONS} (not an exported run), left out")
        elif not run.tests.size:
            notes.append(f"{run.info.path}: no periodic test, left out")
        else:
            tested.append(run)
    notes += [
        f"{count} {family} run(s) left out (not Atari): python -m reporting {family}"
        for family, count in others.items()
    ]
    return tested, notes


def trained_frames(run: ExportedRun) -> int:
    """The frames a run is known to have trained: its last periodic test or its last training
    episode, whichever came later."""
    ends = [series.frames[-1] for series in (run.tests, run.returns) if series and series.size]
    return int(max(ends, default=0))


def training_band(runs: Sequence[ExportedRun]) -> Band | None:
    curves = [
        iteration_means(run.returns.frames, run.returns.values, trained_frames(run))
        for run in runs
        if run.returns is not None
    ]
    curves = [curve for curve in curves if curve[0].size]
    return band_over(curves) if curves else None


def last_shared_frames(runs: Sequence[ExportedRun]) -> int | None:
    shared = functools.reduce(np.intersect1d, (run.tests.frames for run in runs))
    return int(shared[-1]) if shared.size else None


def by_budget(runs: Sequence[ExportedRun]) -> list[tuple[ExportedRun, ...]]:
    """The runs split by their length: runs of another budget are another experiment (β is
    annealed over the run's own length), never pooled."""
    budgets = sorted({run.info.total_frames for run in runs})
    return [tuple(run for run in runs if run.info.total_frames == b) for b in budgets]


def group_variants(runs: Sequence[ExportedRun]) -> list[Variant]:
    """By game, then replay kind in the paper's order, then variant name, then budget."""
    variants = [
        Variant(
            game,
            name,
            members[0].info.kind,
            members,
            band_over([(run.tests.frames, run.tests.values) for run in members]),
            last_shared_frames(members),
            training_band(members),
        )
        for (game, name), runs_of_variant in by_variant(runs).items()
        for members in by_budget(runs_of_variant)
    ]
    return sorted(
        variants,
        key=lambda v: (v.game, kind_key(v.kind), v.name, v.runs[0].info.total_frames),
    )


def _budget(variant: Variant) -> str:
    info = variant.runs[0].info  # every run of a variant has its budget (`by_budget`)
    return f"{count_name(info.total_frames)} frames ({count_name(info.total_steps)} steps)"


def variant_row(variant: Variant) -> str:
    """One markdown row (columns in `markdown`)."""
    game = resolve_game(variant.game)
    seeds = ", ".join(str(run.info.seed) for run in variant.runs)
    random_human = [format_score(value) for value in reference_scores(variant.game, "noop")]
    cells = [game.name, variant.name, f"{len(variant.runs)} ({seeds})", _budget(variant)]
    if variant.shared is None:
        cells += ["–", "–", *random_human, "–", "–", "–", "–"]
    else:
        index = int(np.flatnonzero(variant.band.frames == variant.shared)[0])
        at, references = dopamine_at(variant.game, variant.shared)
        score = variant.band.median[index]
        cells += [
            count_name(variant.shared),
            variant.band.cell(index),
            *random_human,
            format_percent(normalized_score(score, variant.game, "noop")),
            "–" if at is None else count_name(at),
            *(references[a].cell(-1) if a in references else "–" for a in DOPAMINE_AGENTS),
        ]
    return markdown_row([*cells, code_of(run.info.provenance for run in variant.runs)])


def last_training_iteration(variant: Variant) -> int | None:
    """The last iteration every run of the variant completed, in frames; None before one."""
    ends = [int(trained_frames(run) // ITERATION_FRAMES * ITERATION_FRAMES) for run in variant.runs]
    last = min(ends)
    band = variant.training
    return last if band is not None and last in band.frames else None


def training_row(variant: Variant) -> str:
    """One markdown row of the training-return table (columns in `markdown`)."""
    trained = ", ".join(
        f"{trained_frames(run) / 1e6:.2f}M of {count_name(run.info.total_frames)}"
        for run in variant.runs
    )
    cells = [resolve_game(variant.game).name, variant.name, str(len(variant.runs)), trained]
    at = last_training_iteration(variant)
    if at is None:
        return markdown_row(cells + ["–"] * (2 + len(DOPAMINE_AGENTS)))
    index = int(np.flatnonzero(variant.training.frames == at)[0])
    references = dopamine_at(variant.game, at)[1]
    cells += [
        count_name(at),
        variant.training.cell(index),
        *(
            references[a].cell(-1) if a in references and references[a].frames[-1] == at else "–"
            for a in DOPAMINE_AGENTS
        ),
    ]
    return markdown_row(cells)


def markdown(
    results_dir: Path, variants: Sequence[Variant], figures: Sequence[str], notes: Sequence[str]
) -> str:
    runs = sum(len(variant.runs) for variant in variants)
    games = len({variant.game for variant in variants})
    lines = [
        f"# Results beside published curves: `{results_dir}`",
        "",
        f"Runs: {runs}; games: {games}. *Score*: the mean score of the periodic test (`eval/score`:"
        " no-op starts, ε-greedy, the run's `evaluation` settings) at *frames*, the last frame "
        "count at which every run of the variant was tested; median [min, max] over the runs. "
        "*Random* and *human*: the no-op reference scores; *normalized*: (median − random) / "
        "|human − random|.",
        "",
        "*Dopamine DQN* and *Rainbow*: the curves google/dopamine published, at their last "
        "point at or before *frames* (*Dopamine at*), median [min, max] over 5 runs. They are "
        "average **training** returns per 1M-frame iteration with sticky actions (p = 0.25) and "
        "no no-op starts: a reference for the order of magnitude a correct agent reaches, not a "
        "target (reporting/data/README.md). Dopamine published 10 games; – for the others. "
        "*code*: the commits that ran the variant's runs (see Code below).",
        "",
        "| game | variant | runs (seeds) | budget per run | frames | score | random | human | "
        "normalized | Dopamine at | Dopamine DQN | Dopamine Rainbow | code |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *map(variant_row, variants),
        "",
        *evaluation_section([run for variant in variants for run in variant.runs]),
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
        "| game | variant | runs | frames trained | iteration | training return | "
        "Dopamine DQN | Dopamine Rainbow |",
        "|---|---|---|---|---|---|---|---|",
        *map(training_row, variants),
        "",
        "## Figures",
        "",
    ]
    provenances = (run.info.provenance for variant in variants for run in variant.runs)
    return "\n".join([*lines, report_end(figures, provenances, notes)])


def _draw_band(axes, band: Band, colour: str, legend: str, **line) -> None:
    millions = band.frames / 1e6
    axes.plot(millions, band.median, color=colour, label=legend, linewidth=1.5, **line)
    axes.fill_between(millions, band.low, band.high, color=colour, alpha=0.15, linewidth=0)


def plot_game(
    variants: Sequence[Variant],
    bands: Sequence[Band | None],
    dopamine: Mapping[str, Band],
    title: str,
    path: Path,
) -> None:
    """One game: each variant's band (median, min–max over runs) and Dopamine's published
    curves dashed, against frames."""
    figure = Figure(figsize=(7, 4.5), dpi=100)
    axes = figure.subplots()
    # A variant at two budgets is two experiments: each its own colour and legend.
    names = [f"{label(v.name)}, {count_name(v.runs[0].info.total_frames)}" for v in variants]
    colours = variant_colours([(name, v.kind) for name, v in zip(names, variants, strict=True)])
    for name, variant, band in zip(names, variants, bands, strict=True):
        if band is not None:
            count = len(variant.runs)
            legend = f"{name} frames ({count} run{'s' if count != 1 else ''})"
            _draw_band(axes, band, colours[name], legend, marker=".")
    for agent, band in dopamine.items():
        # Markers too: a run shorter than 2M frames overlaps one Dopamine point only.
        _draw_band(
            axes,
            band,
            DOPAMINE_COLOURS[agent],
            f"Dopamine {agent} (training returns, sticky actions; reference only)",
            linestyle="--",
            marker="x",
        )
    random_score, _ = reference_scores(variants[0].game, "noop")
    axes.axhline(random_score, color="grey", linestyle=":", linewidth=1, label="random (no-op)")
    axes.set_title(f"{resolve_game(variants[0].game).name}: {title}")
    axes.set_xlabel("emulator frames (millions)")
    axes.set_ylabel("score (median, min–max over runs)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, framealpha=0.5)  # see-through: points may lie behind it
    figure.tight_layout()
    figure.savefig(path)


def build(results_dir: Path, out: Path) -> Path:
    """Writes the figures and report.md into `out`; returns report.md's path."""
    runs, notes = tested_runs(results_dir)
    if not runs:
        detail = f" ({'; '.join(notes)})" if notes else ""
        raise ValueError(
            f"{results_dir} holds no exported run with a periodic test{detail}; "
            "export runs with: python -m reporting export RUN_DIR --out DIR"
        )
    variants = group_variants(runs)
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    for game in sorted({variant.game for variant in variants}):
        ours = [variant for variant in variants if variant.game == game]
        last = max(int(variant.band.frames[-1]) for variant in ours)
        dopamine = dopamine_at(game, last)[1]
        figures.append(f"published_{game}.png")
        tests = [variant.band for variant in ours]
        plot_game(ours, tests, dopamine, "periodic test (no-op starts)", out / figures[-1])
        training = [variant.training for variant in ours]
        if any(band is not None for band in training):
            figures.append(f"training_{game}.png")
            title = "training return per 1M-frame iteration"
            plot_game(ours, training, dopamine, title, out / figures[-1])
    (out / "report.md").write_text(markdown(results_dir, variants, figures, notes))
    return out / "report.md"
