"""Exported results beside Dopamine's published DQN and Rainbow curves.

    python -m reporting published results --out results/report

Reads the Atari runs that `python -m reporting export` wrote (config.yaml, evaluations.csv)
and writes into OUT one published_<game>.png per game (each replay variant's periodic-test
score against frames, median and min–max over runs, with Dopamine's curves over the same
frames) and report.md (per game and variant, the scores at the last frame count all its runs
share). Dopamine's curves are training returns under another protocol (sticky actions, no
no-op starts; reporting/data/README.md): a reference for the order of magnitude only.
"""

import csv
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from artifacts.run_directory import RunDirectory, find_runs
from envs.games import resolve_game
from evaluation.scores import normalized_score, reference_scores
from reporting.export import ATARI_FAMILY, EVALUATIONS, count_name, read_rows
from reporting.plots import plot_published
from reporting.sweep_report import (
    format_interval,
    format_percent,
    format_score,
    kind_key,
    markdown_row,
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


def packaged_rows(file_name: str) -> list[dict[str, str]]:
    """The rows of a CSV file of reporting/data/ (described in its README.md), by column."""
    text = resources.files(__package__).joinpath("data", file_name).read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


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
class ResultRun:
    info: RunDirectory
    frames: np.ndarray  # of each periodic test, increasing
    scores: np.ndarray  # its mean score


@dataclass(frozen=True)
class Variant:
    """The runs of one game and variant (`RunDirectory.variant`): their band over the union of
    their test frame counts (each point over the runs tested there) and the last frame count
    all share."""

    game: str
    name: str
    kind: str  # the replay kind of every run of the variant
    runs: tuple[ResultRun, ...]
    band: Band
    shared: int | None


def read_results(results_dir: Path) -> tuple[list[ResultRun], list[str]]:
    """(the exported Atari runs with at least one periodic test, notes on the others). Runs of
    other families are left out with one note per family: Dopamine published Atari games, and
    the human reference scores are Atari's."""
    runs, notes, other_families = [], [], {}
    for info in find_runs(results_dir):
        if info.family != ATARI_FAMILY:
            other_families[info.family] = other_families.get(info.family, 0) + 1
            continue
        path = info.path / EVALUATIONS
        if not path.is_file():
            notes.append(f"{info.path}: no {EVALUATIONS} (not an exported run), left out")
            continue
        rows = read_rows(path)
        if not rows:
            notes.append(f"{info.path}: no periodic test, left out")
            continue
        frames = np.array([int(row["frames"]) for row in rows], dtype=np.int64)
        runs.append(ResultRun(info, frames, np.array([float(row["mean_score"]) for row in rows])))
    notes += [
        f"{count} {family} run(s) left out (not Atari): python -m reporting {family}"
        for family, count in sorted(other_families.items())
    ]
    return runs, notes


def band_over_runs(runs: Sequence[ResultRun]) -> Band:
    frames = np.unique(np.concatenate([run.frames for run in runs]))
    points = [[run.scores[run.frames == f][0] for run in runs if f in run.frames] for f in frames]
    return Band(frames, *(np.array([op(p) for p in points]) for op in (np.median, np.min, np.max)))


def last_shared_frames(runs: Sequence[ResultRun]) -> int | None:
    shared = functools.reduce(np.intersect1d, (run.frames for run in runs))
    return int(shared[-1]) if shared.size else None


def group_variants(runs: Sequence[ResultRun]) -> list[Variant]:
    groups: dict[tuple[str, str], list[ResultRun]] = {}
    for run in sorted(runs, key=lambda run: (run.info.seed, str(run.info.path))):
        groups.setdefault((run.info.game, run.info.variant), []).append(run)
    return [
        Variant(
            game,
            name,
            members[0].info.kind,
            tuple(members),
            band_over_runs(members),
            last_shared_frames(members),
        )
        for (game, name), members in sorted(
            groups.items(), key=lambda i: (i[0][0], kind_key(i[1][0].info.kind), i[0][1])
        )
    ]


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


def build(results_dir: Path, out: Path) -> Path:
    """Writes the figures and report.md into `out`; returns report.md's path."""
    runs, notes = read_results(results_dir)
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
