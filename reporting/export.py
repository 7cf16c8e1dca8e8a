"""Exports runs into a small, publishable results directory.

    python -m reporting export RUN_OR_MULTIRUN_DIR [...] --out results

Each Atari run goes to OUT/<game>/<variant>/seed<seed>_<total frames>/ (e.g.
results/pong/proportional/seed0_10M/), a run of another family below OUT/<family>/ (e.g.
results/minatar/breakout/dqn-uniform/seed0_1M/), as three small files: its `config.yaml`
(copied), its periodic tests `evaluations.csv` and its training episodes
`training_returns.csv`. No checkpoint, snapshot or event file is copied. The variant is the
replay kind for a run with the paper's agent and replay settings, and names any other
setting that differs (`artifacts.run_directory.variant_name`).
"""

import csv
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from artifacts.command_line import unwritable_reason
from artifacts.run_directory import CONFIG, RunDirectory, find_runs
from evaluation.scores import normalized_score
from reporting.runs import EPISODE_TAG, EVAL_TAG, read_events, scalars_of, texts_of

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
EPISODES_TAG = "eval/episodes"
EPISODE_SCORES_TAG = "eval/episode_scores"  # a text summary: the scores as a JSON list
# Atari runs are exported straight below OUT, the layout from before other families; the
# others go below OUT/<family>/, since their game names overlap Atari's (MinAtar has a Breakout).
ATARI_FAMILY = "atari"


class ExportError(ValueError):
    """A refusal, raised before anything is written."""


@dataclass(frozen=True)
class Export:
    info: RunDirectory
    evaluations: list[tuple[str, ...]]
    returns: list[tuple[str, ...]]

    def destination(self, out: Path) -> Path:
        name = f"seed{self.info.seed}_{count_name(self.info.total_frames)}"
        family = self.info.family
        below = out if family == ATARI_FAMILY else out / family
        return below / self.info.game / self.info.variant / name


def count_name(count: int) -> str:
    """2000000 -> "2M", 40000 -> "40k": exact, so distinct budgets keep distinct names."""
    for factor, suffix in ((1_000_000, "M"), (1_000, "k")):
        if count % factor == 0:
            return f"{count // factor}{suffix}"
    return str(count)


def number(value: float) -> str:
    """The shortest text that reads back as the same float32, TensorBoard's precision:
    12.333333, not 12.333333015441895; 12, not 12.0."""
    return np.format_float_positional(np.float32(value), trim="-")


def evaluation_rows(info: RunDirectory, scalars: dict, texts: dict) -> list[tuple[str, ...]]:
    """One row per periodic test; the normalized score uses the no-op reference table, as the
    training loop's `eval/normalized_score` does. Absent values are empty cells, and so is
    the normalized score of a game without human reference scores (MinAtar's)."""
    has_reference = info.environment_kind.has_human_reference
    steps, means = scalars.get(EVAL_TAG, ((), ()))
    episodes = dict(zip(*scalars.get(EPISODES_TAG, ((), ())), strict=True))
    scores = texts.get(EPISODE_SCORES_TAG, {})
    rows = []
    for step, mean in zip(steps, means, strict=True):
        count = episodes.get(step)
        listed = json.loads(scores[step]) if step in scores else []
        rows.append(
            (
                str(step),
                str(step * info.frame_skip),
                "" if count is None else str(int(count)),
                number(mean),
                number(normalized_score(mean, info.game, "noop")) if has_reference else "",
                " ".join(number(score) for score in listed),
            )
        )
    return rows


def return_rows(info: RunDirectory, scalars: dict) -> list[tuple[str, ...]]:
    steps, returns = scalars.get(EPISODE_TAG, ((), ()))
    return [
        (str(step), str(step * info.frame_skip), number(value))
        for step, value in zip(steps, returns, strict=True)
    ]


def collect(paths: Sequence[Path], out: Path) -> tuple[list[Export], list[str]]:
    """(the runs below `paths` with something to export, notes on those left out); each run
    once, however many of `paths` hold it. Earlier exports below `out` are not runs."""
    infos = {}
    for path in paths:
        found = [
            info
            for info in (find_runs(path) if Path(path).is_dir() else [])
            if Path(out).resolve() not in info.path.resolve().parents
        ]
        if not found:
            raise ExportError(
                f"{path} holds no run: no config.yaml with a replay.kind below it (outside --out)"
            )
        infos.update((info.path.resolve(), info) for info in found)
    exports, notes = [], []
    for info in infos.values():
        events = read_events(info.tensorboard)
        scalars = scalars_of(events)
        export = Export(
            info, evaluation_rows(info, scalars, texts_of(events)), return_rows(info, scalars)
        )
        if export.evaluations or export.returns:
            exports.append(export)
        else:
            notes.append(f"{info.path}: no `{EVAL_TAG}` or `{EPISODE_TAG}` logged, not exported")
    if not exports:
        raise ExportError(f"no run below {', '.join(map(str, paths))} has logged any score")
    return exports, notes


def check_destinations(exports: Sequence[Export], out: Path) -> None:
    """Refuses two runs with one destination, a destination that holds the export of a run
    with another config, and one that cannot be written."""
    claimed: dict[Path, Export] = {}
    for export in exports:
        destination = export.destination(out)
        if destination in claimed:
            raise ExportError(
                f"{claimed[destination].info.path} and {export.info.path} would "
                f"both be exported to {destination}; export them to separate --out"
            )
        claimed[destination] = export
        config = destination / CONFIG
        if config.exists() and config.read_bytes() != export.info.config_file.read_bytes():
            raise ExportError(
                f"{destination} holds the export of a run with another config; "
                "delete it or choose another --out"
            )
        reason = unwritable_reason(destination)
        if reason is not None:
            raise ExportError(f"cannot write {destination}: {reason}")


def _write_csv(path: Path, columns: Sequence[str], rows) -> None:
    with path.open("w", newline="") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of an exported CSV file, by column name."""
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def write(export: Export, out: Path) -> Path:
    destination = export.destination(out)
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(export.info.config_file, destination / CONFIG)
    _write_csv(destination / EVALUATIONS, EVALUATION_COLUMNS, export.evaluations)
    _write_csv(destination / TRAINING_RETURNS, RETURN_COLUMNS, export.returns)
    return destination


def export_runs(paths: Sequence[Path], out: Path) -> tuple[list[Path], list[str]]:
    """(the directories written, notes on the runs left out); raises ExportError before
    writing anything."""
    exports, notes = collect(paths, out)
    check_destinations(exports, out)
    return [write(export, out) for export in exports], notes
