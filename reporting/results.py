"""Exported runs: the files `python -m reporting export` writes, and reading them back.

Every report reads runs through this module, never a run's TensorBoard events: the published
comparison and the MinAtar report read a results directory, the sweep report a scratch export
of its multirun. `export` puts each run at

    OUT/<game>/<variant>/seed<seed>_<total frames>/           an Atari run
    OUT/<family>/<game>/<variant>/seed<seed>_<total frames>/  a run of another family

(the sweep report's scratch export keeps the multirun's own layout). Wherever it lies, an
exported run is a run directory (`artifacts.run_directory`) holding the run's own config.yaml,
`evaluations.csv` (one row per periodic test, EVALUATION_COLUMNS) and `training_returns.csv`
(one row per training episode, RETURN_COLUMNS). Rows are in increasing step order, one per
step. A value is the shortest decimal that reads back as TensorBoard's float32, and is read as
that decimal: 12.333333 (a mean over 3 episodes) rather than float32's 12.333333015.
"""

import csv
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypeVar

import numpy as np

from artifacts.run_directory import RunDirectory, find_runs

EVALUATIONS = "evaluations.csv"
TRAINING_RETURNS = "training_returns.csv"
EVALUATION_COLUMNS = (
    "step",
    "frames",
    "episodes",
    "mean_score",
    "normalized_score",
    "episode_scores",
)
RETURN_COLUMNS = ("step", "frames", "return")
# Atari runs are exported straight below OUT, the layout from before other families; the
# others go below OUT/<family>/, since their game names overlap Atari's (MinAtar has a Breakout).
ATARI_FAMILY = "atari"
KIND_ORDER = ("uniform", "rank_based", "proportional")  # the paper's order in tables


def count_name(count: int) -> str:
    """2000000 -> "2M", 40000 -> "40k": exact, so distinct budgets keep distinct names."""
    for factor, suffix in ((1_000_000, "M"), (1_000, "k")):
        if count % factor == 0:
            return f"{count // factor}{suffix}"
    return str(count)


def destination(info: RunDirectory, out: Path) -> Path:
    """Where the run of `info` is exported below `out` (the module docstring's layout)."""
    family = info.family
    below = out if family == ATARI_FAMILY else out / family
    return below / info.game / info.variant / f"seed{info.seed}_{count_name(info.total_frames)}"


def kind_key(kind: str) -> tuple[int, str]:
    """Replay kinds in the paper's order, any other after them by name."""
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file, by column name."""
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def packaged_rows(file_name: str) -> list[dict[str, str]]:
    """The rows of a CSV file of reporting/data/ (described in its README.md), by column."""
    text = resources.files(__package__).joinpath("data", file_name).read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


@dataclass(frozen=True)
class Series:
    """One exported file's values, by increasing agent step, with the frames of each step."""

    steps: np.ndarray
    frames: np.ndarray
    values: np.ndarray

    @property
    def size(self) -> int:
        return self.steps.size


def read_series(path: Path, column: str) -> Series | None:
    """`column` of the exported file at `path` against steps and frames; None without the file."""
    if not path.is_file():
        return None
    rows = read_rows(path)
    steps, frames = (
        np.array([int(row[key]) for row in rows], dtype=np.int64) for key in ("step", "frames")
    )
    return Series(steps, frames, np.array([float(row[column]) for row in rows]))


@dataclass(frozen=True)
class ExportedRun:
    """One exported run; each file is read on first use (a report reads the ones it shows)."""

    info: RunDirectory

    @functools.cached_property
    def tests(self) -> Series | None:
        """The mean score of each periodic test; None where the run has no evaluations.csv."""
        return read_series(self.info.path / EVALUATIONS, "mean_score")

    @functools.cached_property
    def returns(self) -> Series | None:
        """Each training episode's return; None where the run has no training_returns.csv."""
        return read_series(self.info.path / TRAINING_RETURNS, "return")


def read_results(results_dir: Path, family: str) -> tuple[list[ExportedRun], dict[str, int]]:
    """(the runs of `family` at or below `results_dir`, by path; how many runs each other family
    has there). A run is any run directory (`find_runs`), exported or not: whether its files
    are there is for the report to say."""
    runs, others = [], {}
    for info in find_runs(results_dir):
        if info.family == family:
            runs.append(ExportedRun(info))
        else:
            others[info.family] = others.get(info.family, 0) + 1
    return runs, dict(sorted(others.items()))


Run = TypeVar("Run")  # an ExportedRun, or a report's view of one with the same `info`


def by_variant(runs: Sequence[Run]) -> dict[tuple[str, str], tuple[Run, ...]]:
    """(game, variant) -> its runs, by seed then path; each report orders the groups."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in sorted(runs, key=lambda run: (run.info.seed, str(run.info.path))):
        groups.setdefault((run.info.game, run.info.variant), []).append(run)
    return {key: tuple(members) for key, members in groups.items()}
