"""Exports runs into a small, publishable results directory.

    python -m reporting export RUN_OR_MULTIRUN_DIR [...] --out results

Each Atari run goes to OUT/<game>/<variant>/seed<seed>_<total frames>/ (e.g.
results/pong/proportional/seed0_10M/), a run of another family below OUT/<family>/ (e.g.
results/minatar/breakout/dqn-uniform/seed0_1M/), as small files: its `config.yaml` and
`provenance.yaml` (copied; for a run from before runs recorded their provenance, one that
says it is unknown), its periodic tests `evaluations.csv` and its training episodes
`training_returns.csv`; and, copied where the run has them, its `changes.yaml` and the
reports of `python evaluate.py RUN_DIR` (`evaluation_<protocol>.json` and `.csv`, each
protocol's). No checkpoint, snapshot or event file is copied. The variant is the
replay kind for a run with the paper's agent and replay settings, and names any other
setting that differs (`artifacts.run_directory.variant_name`).

This is the one reader of run directories' TensorBoard events (`read_run`): every report reads
exported runs (`reporting.results`). An exported run given again is read from its own files.
"""

import csv
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import (
    SCALARS,
    TENSORS,
    EventAccumulator,
)

from artifacts.command_line import unwritable_reason
from artifacts.event_files import EVENT_FILES, first_damage
from artifacts.provenance import NOT_RECORDED, PROVENANCE
from artifacts.run_directory import CONFIG, RunDirectory, find_runs, read_yaml_file
from evaluation.scores import normalized_score
from reporting.results import (
    EVALUATION_COLUMNS,
    EVALUATIONS,
    RETURN_COLUMNS,
    TRAINING_RETURNS,
    destination,
    read_snapshot_evaluation,
)
from reporting.score_table import GAME_COLUMNS, RAW_GAME_COLUMNS, report_files

EVAL_TAG = "eval/score"  # the periodic test's mean score, against agent steps
EPISODE_TAG = "episode/return"
EPISODES_TAG = "eval/episodes"
EPISODE_SCORES_TAG = "eval/episode_scores"  # a text summary: the scores as a JSON list
TEXT_SUFFIX = "/text_summary"  # what SummaryWriter.add_text appends to the tag


class ExportError(ValueError):
    """A refusal, raised before anything is written."""


@dataclass(frozen=True)
class Export:
    """A run's rows as they are written: the cells of evaluations.csv and training_returns.csv;
    and the files copied as they are, checked (`copied_files`)."""

    info: RunDirectory
    evaluations: list[tuple[str, ...]]
    returns: list[tuple[str, ...]]
    notes: tuple[str, ...] = ()  # what could not be read: a last event cut short
    copies: tuple[Path, ...] = ()


def checked_event_files(tensorboard_dir: Path) -> list[str]:
    """Checks every record of the event files TensorBoard reads in `tensorboard_dir` (its
    reader stops at a damaged one without a word, dropping every later event): an
    ExportError names the first record that fails its checksum; a file that ends inside its
    last record (a run stopped while writing it, or one still running) gives a note."""
    notes = []
    for path in sorted(tensorboard_dir.glob(EVENT_FILES)):
        damage = first_damage(path)
        if damage is None:
            continue
        if not damage.cut_short:
            raise ExportError(
                f"{damage}: the events from there on would be missing from the export; restore "
                f"the file, or cut it there (truncate -s {damage.offset} {path}) to export the "
                "events before it"
            )
        notes.append(f"{damage}: the event there is not exported (a run stopped while writing it?)")
    return notes


def read_events(tensorboard_dir: Path) -> tuple[EventAccumulator | None, list[str]]:
    """Every event of the run's event files (no reservoir sampling), once their records are
    checked (`checked_event_files`), and the notes of that check; None without a directory
    (a run that never logged)."""
    if not tensorboard_dir.is_dir():
        return None, []
    notes = checked_event_files(tensorboard_dir)
    accumulator = EventAccumulator(str(tensorboard_dir), size_guidance={SCALARS: 0, TENSORS: 0})
    accumulator.Reload()
    return accumulator, notes


def _latest_per_step(events, value) -> dict[int, object]:
    """A step logged twice (a resumed run repeating a stretch) keeps its last value."""
    return {event.step: value(event) for event in events}


def scalars_of(events: EventAccumulator | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """tag -> (steps, values), sorted by step."""
    curves = {}
    for tag in events.Tags()[SCALARS] if events else ():
        latest = _latest_per_step(events.Scalars(tag), lambda event: event.value)
        steps = np.array(sorted(latest), dtype=np.int64)
        curves[tag] = (steps, np.array([latest[s] for s in steps], dtype=np.float64))
    return curves


def texts_of(events: EventAccumulator | None) -> dict[str, dict[int, str]]:
    """tag (as given to add_text) -> {step: text}."""
    texts = {}
    for tag in events.Tags()[TENSORS] if events else ():
        if events.SummaryMetadata(tag).plugin_data.plugin_name == "text":
            texts[tag.removesuffix(TEXT_SUFFIX)] = _latest_per_step(
                events.Tensors(tag), lambda event: event.tensor_proto.string_val[0].decode()
            )
    return texts


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


def csv_rows(path: Path) -> list[tuple[str, ...]]:
    """The rows of an exported CSV file below its header; none without the file."""
    if not path.is_file():
        return []
    with path.open(newline="") as file:
        return [tuple(row) for row in list(csv.reader(file))[1:]]


def check_score_table(path: Path) -> None:
    """A CSV report of evaluate.py starts with the header of one of its tables."""
    try:
        with path.open(newline="", encoding="utf-8") as file:
            header = tuple(next(csv.reader(file), ()))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"{path} is unreadable: {error}") from None
    if header not in (GAME_COLUMNS, RAW_GAME_COLUMNS):
        raise ValueError(f"{path} is not evaluate.py's report: its header is not a score table's")


def check_changes(path: Path) -> None:
    """changes.yaml lists the changes (`training.run_record`)."""
    if not isinstance(read_yaml_file(path, "record of changes"), list):
        raise ValueError(f"record of changes {path} holds no list of changes")


# How each file copied as it is gets checked, by its suffix.
COPY_CHECKS = {".yaml": check_changes, ".json": read_snapshot_evaluation, ".csv": check_score_table}


def copied_files(info: RunDirectory) -> tuple[Path, ...]:
    """The run's files an export copies as they are: its changes.yaml and evaluate.py's reports
    on it, those it has. Each is checked (COPY_CHECKS): an ExportError names one that does not
    read as what it should be."""
    patterns = report_files(info.path, "*")
    reports = [path for pattern in patterns for path in info.path.glob(pattern.name)]
    copies = sorted(reports) + ([info.changes_file] if info.changes_file.is_file() else [])
    for path in copies:
        try:
            COPY_CHECKS[path.suffix](path)
        except ValueError as error:
            raise ExportError(str(error)) from None
    return tuple(copies)


def read_run(info: RunDirectory) -> Export:
    """The run's rows from its TensorBoard events (none for a run that logged nothing); an
    exported run's, without events and with its CSV files, as they are written there."""
    copies = copied_files(info)
    if not info.tensorboard.is_dir() and (info.path / TRAINING_RETURNS).is_file():
        rows = (csv_rows(info.path / name) for name in (EVALUATIONS, TRAINING_RETURNS))
        return Export(info, *rows, copies=copies)
    events, notes = read_events(info.tensorboard)
    scalars = scalars_of(events)
    evaluations = evaluation_rows(info, scalars, texts_of(events))
    return Export(info, evaluations, return_rows(info, scalars), tuple(notes), copies)


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
    for export in map(read_run, infos.values()):
        notes += [f"{export.info.path}: {note}" for note in export.notes]
        if export.evaluations or export.returns:
            exports.append(export)
        else:
            notes.append(
                f"{export.info.path}: no `{EVAL_TAG}` or `{EPISODE_TAG}` logged, not exported"
            )
    if not exports:
        raise ExportError(f"no run below {', '.join(map(str, paths))} has logged any score")
    return exports, notes


def check_destinations(exports: Sequence[Export], out: Path) -> None:
    """Refuses two runs with one destination, a destination that holds the export of a run
    with another config, and one that cannot be written."""
    claimed: dict[Path, Export] = {}
    for export in exports:
        target = destination(export.info, out)
        if target in claimed:
            raise ExportError(
                f"{claimed[target].info.path} and {export.info.path} would "
                f"both be exported to {target}; export them to separate --out"
            )
        claimed[target] = export
        # Settings, not bytes: a newer version may write the same settings in another order.
        exported = RunDirectory(target)
        if exported.config_file.exists() and exported.config != export.info.config:
            raise ExportError(
                f"{target} holds the export of a run with another config; "
                "delete it or choose another --out"
            )
        reason = unwritable_reason(target)
        if reason is not None:
            raise ExportError(f"cannot write {target}: {reason}")


def _write_csv(path: Path, columns: Sequence[str], rows) -> None:
    with path.open("w", newline="") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)


def write(export: Export, directory: Path) -> Path:
    """The run's files into `directory` (made if needed); returns it. A run without a
    provenance.yaml gets one that records no start: its code is unknown."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(export.info.config_file, directory / CONFIG)
    if export.info.provenance_file.is_file():
        shutil.copyfile(export.info.provenance_file, directory / PROVENANCE)
    else:
        (directory / PROVENANCE).write_text(NOT_RECORDED + "starts: []\n")
    _write_csv(directory / EVALUATIONS, EVALUATION_COLUMNS, export.evaluations)
    _write_csv(directory / TRAINING_RETURNS, RETURN_COLUMNS, export.returns)
    for source in export.copies:
        shutil.copyfile(source, directory / source.name)
    return directory


def export_scratch(directories: Sequence[Path], scratch: Path) -> dict[Path, Path]:
    """Every run at or below `directories` (run directories or exports) written into `scratch`
    for a report, at its path relative to its directory below that directory's number: not
    export's own layout, where runs that differ in a setting the variant does not name (a
    sweep over α) would share a destination. Returns each copy's directory -> the run's own;
    raises ExportError for a directory without a run."""
    sources = {}
    for number, directory in enumerate(directories):
        infos = find_runs(directory)
        if not infos:
            raise ExportError(
                f"{directory} holds no run: no config.yaml with a replay.kind below it"
            )
        for info in infos:
            target = scratch / str(number) / info.path.relative_to(directory)
            sources[write(read_run(info), target)] = info.path
    return sources


def export_runs(paths: Sequence[Path], out: Path) -> tuple[list[Path], list[str]]:
    """(the directories written, notes on the runs left out); raises ExportError before
    writing anything."""
    exports, notes = collect(paths, out)
    check_destinations(exports, out)
    return [write(export, destination(export.info, out)) for export in exports], notes
