"""Exported results beside Dopamine's published DQN and Rainbow curves.

    python -m reporting published results --out results/report

Reads the Atari runs that `python -m reporting export` wrote (config.yaml, evaluations.csv)
and writes into OUT one published_<game>.png per game (each replay variant's periodic-test
score against frames, median and min–max over runs, with Dopamine's curves over the same
frames) and report.md (per game and variant, the scores at the last frame count all its runs
share). Dopamine's curves are training returns under another protocol (sticky actions, no
no-op starts; reporting/data/README.md): a reference for the order of magnitude only.
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from envs.games import resolve_game
from evaluation.scores import normalized_score, reference_scores
from reporting.markdown import format_interval, format_percent, format_score, markdown_row
from reporting.plots import DOPAMINE_COLOURS, label, variant_colours
from reporting.results import (
    ATARI_FAMILY,
    EVALUATIONS,
    ExportedRun,
    by_variant,
    count_name,
    kind_key,
    packaged_rows,
    read_results,
)

DOPAMINE_CSV = "dopamine_baselines_training_returns.csv"
DOPAMINE_AGENTS = ("DQN", "Rainbow")


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
        return format_interval(self.median[index], self.low[index], self.high[index])


@functools.cache
def dopamine_curves() -> dict[tuple[str, str], Band]:
    """(ROM id, agent) -> Dopamine's curve; its game names (`mspacman`) resolve like ours."""
    rows: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    for row in packaged_rows(DOPAMINE_CSV):
        key = (resolve_game(row["game"]).rom_id, row["agent"])
        rows.setdefault(key, []).append(
            tuple(
                float(row[column])
                for column in ("frames", "median_return", "min_return", "max_return")
            )
        )
    return {key: Band(*np.array(sorted(points)).T) for key, points in rows.items()}


@dataclass(frozen=True)
class Variant:
    """The runs of one game and variant (`RunDirectory.variant`): their band over the union of
    their test frame counts (each point over the runs tested there) and the last frame count
    all share."""

    game: str
    name: str
    kind: str  # the replay kind of every run of the variant
    runs: tuple[ExportedRun, ...]  # each with at least one periodic test
    band: Band
    shared: int | None


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


def band_over_runs(runs: Sequence[ExportedRun]) -> Band:
    tests = [run.tests for run in runs]
    frames = np.unique(np.concatenate([test.frames for test in tests]))
    points = [[t.values[t.frames == f][0] for t in tests if f in t.frames] for f in frames]
    return Band(frames, *(np.array([op(p) for p in points]) for op in (np.median, np.min, np.max)))


def last_shared_frames(runs: Sequence[ExportedRun]) -> int | None:
    shared = functools.reduce(np.intersect1d, (run.tests.frames for run in runs))
    return int(shared[-1]) if shared.size else None


def group_variants(runs: Sequence[ExportedRun]) -> list[Variant]:
    """By game, then replay kind in the paper's order, then variant name."""
    variants = [
        Variant(
            game,
            name,
            members[0].info.kind,
            members,
            band_over_runs(members),
            last_shared_frames(members),
        )
        for (game, name), members in by_variant(runs).items()
    ]
    return sorted(variants, key=lambda v: (v.game, kind_key(v.kind), v.name))


def dopamine_at(game: str, frames: int) -> tuple[int | None, dict[str, Band]]:
    """(Dopamine's last frame count ≤ `frames`, each agent's curve up to it); (None, {}) for a
    game Dopamine did not publish or a run shorter than its first point."""
    curves = {
        agent: dopamine_curves()[game, agent].until(frames)
        for agent in DOPAMINE_AGENTS
        if (game, agent) in dopamine_curves()
    }
    curves = {agent: band for agent, band in curves.items() if band.frames.size}
    if not curves:
        return None, {}
    return int(max(band.frames[-1] for band in curves.values())), curves


def _budgets(variant: Variant) -> str:
    budgets = sorted({(run.info.total_frames, run.info.total_steps) for run in variant.runs})
    return "; ".join(f"{count_name(f)} frames ({count_name(s)} steps)" for f, s in budgets)


def variant_row(variant: Variant) -> str:
    """One markdown row (columns in `markdown`)."""
    game = resolve_game(variant.game)
    seeds = ", ".join(str(run.info.seed) for run in variant.runs)
    random_human = [format_score(value) for value in reference_scores(variant.game, "noop")]
    cells = [game.name, variant.name, f"{len(variant.runs)} ({seeds})", _budgets(variant)]
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
        "target (reporting/data/README.md). Dopamine published 10 games; – for the others.",
        "",
        "| game | variant | runs (seeds) | budget per run | frames | score | random | human | "
        "normalized | Dopamine at | Dopamine DQN | Dopamine Rainbow |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *map(variant_row, variants),
        "",
        "## Figures",
        "",
        *[f"![{name}]({name})" for name in figures],
    ]
    if notes:
        lines += ["", "## Left out", "", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def _draw_band(axes, band: Band, colour: str, legend: str, **line) -> None:
    millions = band.frames / 1e6
    axes.plot(millions, band.median, color=colour, label=legend, linewidth=1.5, **line)
    axes.fill_between(millions, band.low, band.high, color=colour, alpha=0.15, linewidth=0)


def plot_published(variants: Sequence[Variant], dopamine: Mapping[str, Band], path: Path) -> None:
    """One game: each variant's periodic-test score (median, min–max band over runs) and
    Dopamine's published curves dashed, against frames."""
    figure = Figure(figsize=(7, 4.5), dpi=100)
    axes = figure.subplots()
    colours = variant_colours([(variant.name, variant.kind) for variant in variants])
    for variant in variants:
        legend = f"{label(variant.name)} ({len(variant.runs)} runs)"
        _draw_band(axes, variant.band, colours[variant.name], legend, marker=".")
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
    axes.set_title(f"{resolve_game(variants[0].game).name}: periodic test (no-op starts)")
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
        figures.append(f"published_{game}.png")
        plot_published(ours, dopamine_at(game, last)[1], out / figures[-1])
    (out / "report.md").write_text(markdown(results_dir, variants, figures, notes))
    return out / "report.md"
