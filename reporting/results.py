"""Exported runs: the files `python -m reporting export` writes, and the one reader of them.

The reports read exported runs through `read_runs`, the family (`atari`, `minatar`) a parameter.
An export is a run directory (`artifacts.run_directory`) holding the run's config.yaml,
provenance.yaml, `evaluations.csv` (a row per periodic test), `training_returns.csv` (a row per
training episode), `trained.yaml` (how far it trained, whether it finished: wrote its final
snapshot), and where the run has them its changes.yaml and evaluate.py's reports on it. Rows
are by increasing step, one per step, each value the shortest decimal that reads back as
TensorBoard's float32 (12.333333, not 12.333333015). A file is read whole or refused in one line
naming it: cut short (no line break at its end: every writer of these files ends it so), not
what export writes, or with scores beyond what trained.yaml records (an export stopped
part-way). An export from before trained.yaml finished if its last periodic test is at its last
step, and trained as far as its last row.
"""

import csv
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from artifacts.run_directory import CONFIG, RunDirectory, find_runs, read_yaml_file
from evaluation.runs import SNAPSHOT_NAMES
from reporting.score_table import GAME_COLUMNS, RAW_GAME_COLUMNS, RunScore, report_files

EVALUATIONS, TRAINING_RETURNS, TRAINED = "evaluations.csv", "training_returns.csv", "trained.yaml"
EVALUATION_COLUMNS = "step frames episodes mean_score normalized_score episode_scores".split()
RETURN_COLUMNS = ["step", "frames", "return"]
# Atari runs are exported straight below OUT, the layout from before other families; the
# others go below OUT/<family>/, since their game names overlap Atari's (MinAtar has a Breakout).
ATARI_FAMILY = "atari"
KIND_ORDER = ("uniform", "rank_based", "proportional")  # the paper's order in tables
# Each family's name in a report and the command that reports it.
FAMILIES = {ATARI_FAMILY: ("Atari", "published"), "minatar": ("MinAtar", "minatar")}
STRAY = "scores without a run's config.yaml (an export stopped before writing it?), left out"


def count_name(count: int) -> str:
    """2000000 -> "2M", 40000 -> "40k": exact, so distinct budgets keep distinct names."""
    for factor, suffix in ((1_000_000, "M"), (1_000, "k")):
        if count % factor == 0:
            return f"{count // factor}{suffix}"
    return str(count)


def kind_key(kind: str) -> tuple[int, str]:
    """Replay kinds in the paper's order, any other after them by name."""
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def whole_text(path: Path) -> str:
    """The file's text; a one-line ValueError where it is unreadable or cut short."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is unreadable: {error}") from None
    if text and not text.endswith("\n"):
        raise ValueError(
            f"{path} is cut short: its last line has no end (written or copied part-way?); "
            "export the run again"
        )
    return text


def read_yaml(path: Path, what: str):
    """The data of the whole YAML file at `path` (`whole_text`, then `read_yaml_file`)."""
    whole_text(path)
    return read_yaml_file(path, what)


def read_table(path: Path, columns: Sequence[str], value: str) -> list[list[str]] | None:
    """The rows below the exported CSV file's header, checked (the module docstring; no row
    leaves the `value` column empty); None without the file."""
    if not path.is_file():
        return None
    rows = list(csv.reader(whole_text(path).splitlines()))
    if not rows or rows[0] != list(columns):
        raise ValueError(f"{path} is not an export's: its header is not {','.join(columns)}")
    last, required = -1, columns.index(value)
    for number, row in enumerate(rows[1:], start=2):
        try:
            if len(row) != len(columns):
                raise ValueError(f"{len(row)} cells, where the header has {len(columns)}")
            step, _, _ = int(row[0]), int(row[1]), float(row[required])
            _ = [float(token) for cell in row[2:] for token in cell.split()]
            if step <= last:
                raise ValueError(f"step {step} after step {last}")
        except ValueError as error:
            raise ValueError(f"{path} is damaged at line {number}: {error}") from None
        last = step
    return rows[1:]


@dataclass(frozen=True)
class SnapshotEvaluation:
    """evaluate.py's evaluation of one run (its JSON report in the run directory)."""

    snapshot: str  # which snapshot it played: a key of `evaluation.runs.SNAPSHOT_NAMES`
    score: RunScore


def read_snapshot_evaluation(path: Path) -> SnapshotEvaluation:
    """The evaluation in evaluate.py's JSON report at `path`, written in a run directory; a
    one-line ValueError naming the file where it is not JSON or not one run's report."""
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is unreadable: {error}") from None
    runs = document.get("runs") if isinstance(document, dict) else None
    run = runs[0] if isinstance(runs, list) and len(runs) == 1 else None
    known = run if isinstance(run, dict) else {}
    numbers = {key: known.get(key) for key in ("frames", "episodes", "mean", "std", "normalized")}
    if numbers["normalized"] is None:  # a raw-score protocol's
        del numbers["normalized"]
    wrong = [key for key, value in numbers.items() if type(value) not in (int, float)]  # no bool
    if run is None:
        count = len(runs) if isinstance(runs, list) else "no"
        problem = f"{count} runs' scores where a run directory's report has one"
    elif document.get("snapshot") not in SNAPSHOT_NAMES:
        problem = f"snapshot {document.get('snapshot')!r}, not one of {', '.join(SNAPSHOT_NAMES)}"
    elif not isinstance(run, dict):
        problem = f"runs[0] is {run!r}, not an object"
    elif wrong:
        problem = f"runs[0].{wrong[0]} is {numbers[wrong[0]]!r}, not a number"
    else:
        try:
            return SnapshotEvaluation(document["snapshot"], RunScore(**run))
        except TypeError as error:  # a key missing or unknown
            problem = str(error).removeprefix("RunScore.__init__() ")
    raise ValueError(f"{path} is not evaluate.py's report on one run: {problem}")


def check_changes(path: Path) -> None:
    """changes.yaml lists the changes (`training.run_record`)."""
    if not isinstance(read_yaml(path, "record of changes"), list):
        raise ValueError(f"record of changes {path} holds no list of changes")


def check_score_table(path: Path) -> None:
    """A CSV report of evaluate.py starts with the header of one of its tables."""
    header = tuple(next(csv.reader(whole_text(path).splitlines()), ()))
    if header not in (GAME_COLUMNS, RAW_GAME_COLUMNS):
        raise ValueError(f"{path} is not evaluate.py's report: its header is not a score table's")


def copied_files(info: RunDirectory) -> tuple[Path, ...]:
    """The run's files an export copies as they are, those it has: evaluate.py's reports and
    its changes.yaml; each checked, and its provenance.yaml too."""
    if info.provenance_file.is_file():
        recorded = read_yaml(info.provenance_file, "provenance")
        if not (isinstance(recorded, dict) and isinstance(recorded.get("starts"), list)):
            raise ValueError(f"provenance {info.provenance_file} holds no list of starts")
    checks = {".json": read_snapshot_evaluation, ".csv": check_score_table, ".yaml": check_changes}
    copies = [
        *sorted(info.path.glob("evaluation_*.json")),
        *sorted(info.path.glob("evaluation_*.csv")),
    ]
    copies += [info.changes_file] if info.changes_file.is_file() else []
    for path in copies:
        checks[path.suffix](path)
    return tuple(copies)


@dataclass(frozen=True)
class Series:
    """One exported file's values, by increasing agent step, with the frames of each step."""

    steps: np.ndarray
    frames: np.ndarray
    values: np.ndarray

    @property
    def size(self) -> int:
        return self.steps.size


def series(rows: list[Sequence[str]] | None, column: int) -> Series | None:
    if rows is None:
        return None
    steps, frames = (np.array([int(row[i]) for row in rows], dtype=np.int64) for i in (0, 1))
    return Series(steps, frames, np.array([float(row[column]) for row in rows]))


@dataclass(frozen=True, eq=False)
class ExportedRun:
    """One run as exported: its rows (None without the file), the agent steps it trained, and
    whether it finished. Runs are told apart by identity."""

    info: RunDirectory
    evaluation_rows: list[Sequence[str]] | None
    return_rows: list[Sequence[str]] | None
    steps: int
    finished: bool

    @functools.cached_property
    def tests(self) -> Series | None:
        """The mean score of each periodic test."""
        return series(self.evaluation_rows, EVALUATION_COLUMNS.index("mean_score"))

    @functools.cached_property
    def returns(self) -> Series | None:
        """Each training episode's return."""
        return series(self.return_rows, RETURN_COLUMNS.index("return"))

    @property
    def trained_frames(self) -> int:
        return self.steps * self.info.frame_skip

    def evaluation(self, protocol: str) -> SnapshotEvaluation | None:
        """evaluate.py's evaluation of the run under `protocol`; None where it has none."""
        path = report_files(self.info.path, protocol)[0]
        return read_snapshot_evaluation(path) if path.is_file() else None


def read_export(info: RunDirectory) -> ExportedRun:
    """The exported run at `info`, every file checked (the module docstring)."""
    whole_text(info.config_file)
    copied_files(info)
    evaluations = read_table(info.path / EVALUATIONS, EVALUATION_COLUMNS, "mean_score")
    returns = read_table(info.path / TRAINING_RETURNS, RETURN_COLUMNS, "return")
    logged = max((int(rows[-1][0]) for rows in (evaluations, returns) if rows), default=0)
    record = info.path / TRAINED
    if not record.is_file():  # an export from before the record: a last test at the last step
        finished = bool(evaluations) and int(evaluations[-1][0]) == info.total_steps
        return ExportedRun(info, evaluations, returns, logged, finished)
    trained = read_yaml(record, "record of training")
    trained = trained if isinstance(trained, dict) else {}
    steps, finished = trained.get("steps"), trained.get("finished")
    if isinstance(steps, bool) or not (isinstance(steps, int) and isinstance(finished, bool)):
        raise ValueError(f"{record} is not an export's: it needs steps (a count) and finished")
    if logged > steps:
        raise ValueError(
            f"{record} records {steps} steps, but the scores reach step {logged} (an export "
            "stopped part-way?); export the run again"
        )
    return ExportedRun(info, evaluations, returns, steps, finished)


def stray_scores(root: Path, runs: Sequence[RunDirectory]) -> list[Path]:
    """The directories at or below `root` but `runs` (and dot-directories, as for `find_runs`)
    with scores and no run's config.yaml (none, an empty one, another file's): an export
    stopped before writing it; a one-line ValueError where that config.yaml is cut short."""
    found = {path.parent for name in (EVALUATIONS, TRAINING_RETURNS) for path in root.rglob(name)}
    hidden = {p for p in found if any(part.startswith(".") for part in p.relative_to(root).parts)}
    strays = sorted(found - {info.path for info in runs} - hidden)
    for directory in strays:
        if (directory / CONFIG).is_file():
            whole_text(directory / CONFIG)
    return strays


def read_runs(root: Path, family: str) -> tuple[list[ExportedRun], list[str]]:
    """(the exported runs of `family` at or below `root`, by path; a note on each directory of
    scores that is no run's, and on each other family's runs: how many, and what reports them).
    Whether a run has the files a report needs is for the report to say."""
    infos = find_runs(root)
    notes = [f"{directory}: {STRAY}" for directory in stray_scores(root, infos)]
    name = FAMILIES[family][0]
    for other in sorted({info.family for info in infos} - {family}):
        count, command = sum(info.family == other for info in infos), FAMILIES[other][1]
        notes.append(f"{count} {other} run(s) left out (not {name}): python -m reporting {command}")
    return [read_export(info) for info in infos if info.family == family], notes
