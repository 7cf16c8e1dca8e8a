"""Exported MinAtar runs grouped by game and variant, their statistics over seeds at a frame
count, their figure curves, and MinAtar's published DQN values. Reads files; writes none.

A run is an export (`python -m reporting export`) of the MinAtar family: its config.yaml, its
training_returns.csv (one row per episode) and, when present, its evaluations.csv. How far a
run trained is the later of its last episode's end and its last periodic test: a finished run's
last episode is cut off at the budget and never logged, so episodes alone never reach it.
"""

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from artifacts.provenance import code_of
from artifacts.run_directory import RunDirectory, variant_name
from envs.minatar import GAMES
from reporting import seed_statistics
from reporting.curves import UNIFORM
from reporting.results import (
    TRAINING_RETURNS,
    ExportedRun,
    Setting,
    by_setting,
    kind_key,
    packaged_rows,
    read_results,
)

FAMILY = "minatar"
REFERENCE_CSV = "minatar_dqn_reference.csv"
TARGET_ORDER = ("dqn", "double_dqn")  # MinAtar's published target first
GRID_POINTS = 200  # of the figures' mean over seeds


@dataclass(frozen=True)
class SeedRun:
    """One exported run: its episodes (`seed_statistics` conventions), its periodic tests
    (the frames of each and its mean score) and how far it trained."""

    info: RunDirectory
    frames: np.ndarray
    returns: np.ndarray
    trained_frames: int
    test_frames: np.ndarray
    test_scores: np.ndarray

    @functools.cached_property
    def last_average(self) -> np.ndarray:
        return seed_statistics.last_average(self.returns)

    @functools.cached_property
    def running_average(self) -> np.ndarray:
        return seed_statistics.running_average(self.returns)


@dataclass(frozen=True)
class VariantRuns:
    """The runs of one game and setting (`results.Setting`: the variant, and the values of the
    keys varied between its runs), by seed: they differ in their seed alone."""

    setting: Setting
    kind: str
    target_rule: str
    runs: tuple[SeedRun, ...]

    @property
    def game(self) -> str:
        return self.setting.game

    @property
    def name(self) -> str:
        return self.setting.name

    @property
    def code(self) -> str:
        """The commits that made its runs (`artifacts.provenance.code_of`)."""
        return code_of(run.info.provenance for run in self.runs)

    @property
    def baseline(self) -> str | None:
        """The uniform variant this one is compared with (same target rule); None for a
        uniform variant."""
        return None if self.kind == UNIFORM else variant_name(UNIFORM, self.target_rule)

    def at(self, frames: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(last-100 averages, running averages, periodic test scores) at `frames`: the first
        two one per run that trained that far (and had ended an episode by then), the last one
        per such run that had been tested by then (its latest test)."""
        reached = [r for r in self.runs if r.trained_frames >= frames and r.frames[0] <= frames]
        last = [seed_statistics.value_at(r.frames, r.last_average, frames) for r in reached]
        running = [seed_statistics.value_at(r.frames, r.running_average, frames) for r in reached]
        tests = np.array(
            [seed_statistics.value_at(r.test_frames, r.test_scores, frames) for r in reached]
        )
        return np.array(last), np.array(running), tests[~np.isnan(tests)]


def seed_run(run: ExportedRun, source: Callable = lambda info: info.path) -> SeedRun | str:
    """The exported run's episodes, or why it is left out (naming it by `source(info)`)."""
    if run.returns is None:
        return f"{source(run.info)}: no {TRAINING_RETURNS} (not an exported run), left out"
    if not run.returns.size:
        return f"{source(run.info)}: no training episode, left out"
    frames = run.returns.frames
    tests = run.tests
    test_frames, test_scores = (np.zeros(0),) * 2 if tests is None else (tests.frames, tests.values)
    trained = max([int(frames[-1]), *(int(f) for f in test_frames)])
    return SeedRun(run.info, frames, run.returns.values, trained, test_frames, test_scores)


def variant_key(variant: VariantRuns) -> tuple:
    """Games in MinAtar's order; per game the published target first, uniform first, a
    variant's settings by their values."""
    target = variant.target_rule
    return (
        GAMES.index(variant.game) if variant.game in GAMES else len(GAMES),
        variant.game,
        TARGET_ORDER.index(target) if target in TARGET_ORDER else len(TARGET_ORDER),
        target,
        kind_key(variant.kind),
        variant.setting.variant,
        variant.setting.order,
    )


def read_variants(
    results_dir: Path, source: Callable = lambda info: info.path
) -> tuple[list[VariantRuns], list[str]]:
    """(the exported MinAtar runs below `results_dir` by game and setting, in `variant_key`
    order; notes on the runs left out, naming each by `source(info)`). Runs of other families
    are not looked at."""
    runs, notes = [], []
    for run in read_results(results_dir, FAMILY)[0]:
        episodes = seed_run(run, source)
        if isinstance(episodes, str):
            notes.append(episodes)
        else:
            runs.append(episodes)
    settings, repeats = by_setting(runs, source)
    variants = [
        VariantRuns(setting, members[0].info.kind, members[0].info.target_rule, members)
        for setting, members in settings.items()
    ]
    return sorted(variants, key=variant_key), notes + repeats


@dataclass(frozen=True)
class Cell:
    """One game and variant at one frame count: mean and standard error over the seeds that
    trained that far of the last-100 average, of the running average and of the latest
    periodic test's score, and (prioritized variants with a baseline there) each one's
    difference to the baseline with its 95 % Welch interval, `seed_statistics.welch_interval`'s
    triple; NaN where undefined."""

    variant: VariantRuns
    frames: int
    seeds: int
    last: tuple[float, float]
    running: tuple[float, float]
    test: tuple[float, float]
    last_versus_uniform: tuple[float, float, float] | None
    running_versus_uniform: tuple[float, float, float] | None
    test_versus_uniform: tuple[float, float, float] | None


def cells_at(variants: Sequence[VariantRuns], frames: int) -> list[Cell]:
    """A cell per variant with a run that trained `frames` frames, in the order given."""
    values = {(v.game, v.name): v.at(frames) for v in variants}
    cells = []
    for variant in variants:
        measures = values[variant.game, variant.name]
        if measures[0].size == 0:
            continue
        baseline = values.get((variant.game, variant.baseline))
        versus = [None] * len(measures)
        if baseline is not None and baseline[0].size:
            versus = [
                seed_statistics.welch_interval(ours, theirs)
                for ours, theirs in zip(measures, baseline, strict=True)
            ]
        last, running, test = map(seed_statistics.mean_and_standard_error, measures)
        cells.append(Cell(variant, frames, measures[0].size, last, running, test, *versus))
    return cells


@dataclass(frozen=True)
class SeedBand:
    """A variant's figure: each seed's last-100 average at its episode ends, and over the
    seeds that trained that far, the mean and standard error on a common frame grid."""

    name: str
    kind: str
    seeds: tuple[tuple[np.ndarray, np.ndarray], ...]  # (frames, last-100 average) per seed
    grid: np.ndarray
    mean: np.ndarray
    error: np.ndarray


def seed_band(variant: VariantRuns, end_frames: int) -> SeedBand:
    """The variant's figure curves on GRID_POINTS equal steps up to `end_frames`."""
    grid = np.linspace(end_frames / GRID_POINTS, end_frames, GRID_POINTS)
    rows = [
        seed_statistics.on_grid(run.frames, run.last_average, grid, run.trained_frames)
        for run in variant.runs
    ]
    mean, error = seed_statistics.mean_and_standard_error(rows)
    seeds = tuple((run.frames, run.last_average) for run in variant.runs)
    return SeedBand(variant.name, variant.kind, seeds, grid, mean, error)


@dataclass(frozen=True)
class Reference:
    """MinAtar's published DQN on one game: frames -> training return, read off a plot; not
    `comparable` where the game changed since (reporting/data/README.md)."""

    returns: dict[int, float]
    comparable: bool


@functools.cache
def published_dqn() -> dict[str, Reference]:
    """Game -> its reference; a game is not comparable where any of its rows' sources says so."""
    rows: dict[str, list[dict[str, str]]] = {}
    for row in packaged_rows(REFERENCE_CSV):
        rows.setdefault(row["game"], []).append(row)
    return {
        game: Reference(
            {int(row["frames"]): float(row["dqn_training_return_approx"]) for row in members},
            not any("not comparable" in row["source"] for row in members),
        )
        for game, members in rows.items()
    }
