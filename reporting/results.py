"""Exported runs: the files `python -m reporting export` writes, and reading them back.

Every report reads runs through this module, never a run's TensorBoard events: the published
comparison and the MinAtar report read a results directory, the sweep report a scratch export
of its directories. `export` puts each run at

    OUT/<game>/<variant>/seed<seed>_<total frames>/           an Atari run
    OUT/<family>/<game>/<variant>/seed<seed>_<total frames>/  a run of another family

(the sweep report's scratch export keeps the multirun's own layout). Wherever it lies, an
exported run is a run directory (`artifacts.run_directory`) holding the run's own config.yaml,
its provenance.yaml (`artifacts.provenance`), `evaluations.csv` (one row per periodic test,
EVALUATION_COLUMNS) and `training_returns.csv` (one row per training episode,
RETURN_COLUMNS); and, where the run has them, its changes.yaml and the reports of evaluate.py
on it (`evaluation_<protocol>.json` and `.csv`, `reporting.score_table`), copied as they
are. Rows are in increasing step order, one per step. A value is the shortest decimal that
reads back as TensorBoard's float32, and is read as that decimal: 12.333333 (a mean over 3
episodes) rather than float32's 12.333333015.

The sweep and MinAtar reports show one row per `Setting` (`by_setting`): a game, a variant, and
the values of the settings that differ between that variant's runs of the game (a sweep's
keys), so that only runs that differ in their seed alone are pooled as seeds.
"""

import csv
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypeVar

import numpy as np

from artifacts.run_directory import RunDirectory, find_runs
from evaluation.runs import SNAPSHOT_NAMES
from reporting.score_table import RunScore, report_files

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


# Not a setting that tells runs apart: their seeds are pooled, their games reported apart.
POOLED_KEYS = ("seed", "env.game")
UNSET = "unset"


def flat_settings(config: dict, prefix: str = "") -> dict[str, object]:
    """A run config's settings by dotted key (`replay.priority_exponent`)."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(flat_settings(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def setting_text(settings: dict[str, object], key: str) -> str:
    """`key`'s value as a name shows it: YAML's words for null and booleans, a number by its
    value (1 and 1.0 alike), `unset` where the config has no such key."""
    value = settings.get(key, UNSET)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 1e15 else repr(number)
    return str(value)


def varied_keys(infos: Sequence[RunDirectory]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(game, variant) -> the settings whose values differ between its runs, but for
    POOLED_KEYS, by key: what a sweep over that variant varied. Games are reported apart, so
    what differs between games alone (a device, the threads) names nothing."""
    configs: dict[tuple[str, str], list[dict[str, object]]] = {}
    for info in infos:
        configs.setdefault((info.game, info.variant), []).append(flat_settings(info.config))
    varied = {}
    for place, flats in configs.items():
        keys = set().union(*flats) - set(POOLED_KEYS)
        texts = {key: {setting_text(flat, key) for flat in flats} for key in keys}
        varied[place] = tuple(sorted(key for key in keys if len(texts[key]) > 1))
    return varied


def _order(text: str) -> tuple:
    """Numbers by value before any other text."""
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


@dataclass(frozen=True)
class Setting:
    """What a report shows as one row: a game, a variant and the values of the keys varied
    between that variant's runs of that game (`varied_keys`), as `setting_text` writes them."""

    game: str
    variant: str
    values: tuple[tuple[str, str], ...]  # (dotted key, value) by key

    @property
    def name(self) -> str:
        """The variant, then `key=value` for each varied key: `dqn-proportional
        replay.priority_exponent=0.4`."""
        return " ".join([self.variant, *(f"{key}={value}" for key, value in self.values)])

    @property
    def order(self) -> tuple:
        """The values in order, numbers by value: a setting's place beside its variant's."""
        return tuple(_order(value) for _, value in self.values)


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
class SnapshotEvaluation:
    """evaluate.py's evaluation of one run (its JSON report in the run directory)."""

    snapshot: str  # which snapshot it played: a key of `evaluation.runs.SNAPSHOT_NAMES`
    score: RunScore


def _snapshot_evaluation(document) -> SnapshotEvaluation:
    """The one run's evaluation in a report's JSON data; a ValueError says what is amiss."""
    runs = document.get("runs") if isinstance(document, dict) else None
    if not isinstance(runs, list) or len(runs) != 1:
        count = len(runs) if isinstance(runs, list) else "no"
        raise ValueError(f"{count} runs' scores where a run directory's report has one")
    if document.get("snapshot") not in SNAPSHOT_NAMES:
        allowed = ", ".join(SNAPSHOT_NAMES)
        raise ValueError(f"snapshot {document.get('snapshot')!r}, not one of {allowed}")
    run = runs[0]
    if not isinstance(run, dict):
        raise ValueError(f"runs[0] is {run!r}, not an object")
    numbers = {key: run.get(key) for key in ("frames", "episodes", "mean", "std")}
    if run.get("normalized") is not None:
        numbers["normalized"] = run["normalized"]
    for key, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"runs[0].{key} is {value!r}, not a number")
    try:
        score = RunScore(**run)
    except TypeError as error:  # a key missing or unknown
        raise ValueError(str(error).removeprefix("RunScore.__init__() ")) from None
    return SnapshotEvaluation(document["snapshot"], score)


def read_snapshot_evaluation(path: Path) -> SnapshotEvaluation:
    """The evaluation in evaluate.py's JSON report at `path`, written in a run directory; a
    one-line ValueError naming the file where it is not JSON or not one run's report."""
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is unreadable: {error}") from None
    try:
        return _snapshot_evaluation(document)
    except ValueError as error:
        raise ValueError(f"{path} is not evaluate.py's report on one run: {error}") from None


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

    def evaluation(self, protocol: str) -> SnapshotEvaluation | None:
        """evaluate.py's evaluation of the run under `protocol`; None where it has none."""
        path = report_files(self.info.path, protocol)[0]
        return read_snapshot_evaluation(path) if path.is_file() else None


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


def _by_seed(runs: Sequence[Run]) -> list[Run]:
    return sorted(runs, key=lambda run: (run.info.seed, str(run.info.path)))


def by_variant(runs: Sequence[Run]) -> dict[tuple[str, str], tuple[Run, ...]]:
    """(game, variant) -> its runs, by seed then path; each report orders the groups."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in _by_seed(runs):
        groups.setdefault((run.info.game, run.info.variant), []).append(run)
    return {key: tuple(members) for key, members in groups.items()}


def by_setting(
    runs: Sequence[Run], source=lambda info: info.path
) -> tuple[dict[Setting, tuple[Run, ...]], list[str]]:
    """(`Setting` -> its runs, by seed then path; a note, naming runs by `source(info)`, on
    each run left out as a repeat: the same setting and seed as a run kept). The runs of a
    setting differ in their seed alone: they are its seeds. Each report orders the groups."""
    varied = varied_keys([run.info for run in runs])
    groups: dict[Setting, list[Run]] = {}
    notes = []
    for run in _by_seed(runs):
        info = run.info
        values = flat_settings(info.config)
        keys = varied[info.game, info.variant]
        setting = Setting(
            info.game, info.variant, tuple((k, setting_text(values, k)) for k in keys)
        )
        members = groups.setdefault(setting, [])
        twin = next((member for member in members if member.info.seed == info.seed), None)
        if twin is None:
            members.append(run)
        else:
            notes.append(
                f"{source(info)}: the same settings and seed as {source(twin.info)}, left out "
                "(only seeds are pooled)"
            )
    return {key: tuple(members) for key, members in groups.items()}, notes
