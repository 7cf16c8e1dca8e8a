"""Exports runs into a small, publishable results directory.

    python -m reporting export RUN_OR_MULTIRUN_DIR [...] --out results

Each Atari run goes to OUT/<game>/<variant>/seed<seed>_<budget>/ (e.g.
results/pong/proportional/seed0_10M/), a run of another family below OUT/<family>/ (e.g.
results/minatar/breakout/dqn-uniform/seed0_1M/), a run that has not finished (no final snapshot)
to that name ending in `_unfinished`, which its export once finished replaces. The files: its
config.yaml and provenance.yaml (copied; for a run from before runs recorded their provenance,
one that says it is unknown), its periodic tests (evaluations.csv), its training episodes
(training_returns.csv), how far it trained and whether it finished (trained.yaml); copied where
the run has them, its changes.yaml and evaluate.py's reports on it. No checkpoint, snapshot or
event file. The variant is the replay kind for a run with the paper's agent and replay settings,
and names any other setting that differs (`artifacts.run_directory.variant_name`).

Everything is checked before anything is written; each file is written whole or not at all
(`artifacts.atomic`), config.yaml last, so an export that fails part-way leaves no file cut and
no run without its files, and running it again works. This is the one reader of TensorBoard
events: every report reads exported runs (`reporting.results`). An exported run given again is
read from its own files.
"""

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as events

from artifacts.atomic import write_atomically
from artifacts.command_line import unwritable_reason
from artifacts.event_files import EVENT_FILES, first_damage
from artifacts.provenance import NOT_RECORDED, PROVENANCE
from artifacts.run_directory import CONFIG, FINAL_SNAPSHOT, RunDirectory, find_runs
from evaluation.scores import normalized_score
from reporting import results
from reporting.results import EVALUATIONS, TRAINED, TRAINING_RETURNS, ExportedRun

EVAL_TAG = "eval/score"  # the periodic test's mean score, against agent steps
EPISODE_TAG = "episode/return"
EPISODES_TAG = "eval/episodes"
EPISODE_SCORES_TAG = "eval/episode_scores"  # a text summary: the scores as a JSON list
TEXT_SUFFIX = "/text_summary"  # what SummaryWriter.add_text appends to the tag
UNFINISHED = "_unfinished"  # ends the directory name of a run exported before it finished


class ExportError(ValueError):
    """A refusal, raised before anything is written."""


def destination(info: RunDirectory, out: Path, finished: bool) -> Path:
    """Where the run of `info` is exported below `out` (the module docstring's layout)."""
    below = out if info.family == results.ATARI_FAMILY else out / info.family
    name = (
        f"seed{info.seed}_{results.count_name(info.total_frames)}{'' if finished else UNFINISHED}"
    )
    return below / info.game / info.variant / name


def read_events(directory: Path) -> tuple[dict, dict, list[str]]:
    """(tag -> (steps, values) of every scalar, tag as given to add_text -> {step: text}, notes)
    from the run's event files, every record checked first (TensorBoard's reader stops at a
    damaged one without a word, dropping every later event): an ExportError names the first
    that fails its checksum; a file that ends inside its last record (a run stopped while
    writing it, or still running) gives a note. A step logged twice (a resumed run repeating a
    stretch) keeps its last value. Nothing without a directory (a run that never logged)."""
    if not directory.is_dir():
        return {}, {}, []
    notes = []
    for path in sorted(directory.glob(EVENT_FILES)):
        damage = first_damage(path)
        if damage is not None and not damage.cut_short:
            raise ExportError(
                f"{damage}: the events from there on would be missing from the export; restore "
                f"the file, or cut it there (truncate -s {damage.offset} {path}) to export the "
                "events before it"
            )
        if damage is not None:
            notes.append(
                f"{damage}: the event there is not exported (a run stopped while writing it?)"
            )
    logged = events.EventAccumulator(
        str(directory), size_guidance={events.SCALARS: 0, events.TENSORS: 0}
    )
    logged.Reload()
    scalars = {}
    for tag in logged.Tags()[events.SCALARS]:
        latest = {event.step: event.value for event in logged.Scalars(tag)}
        steps = np.array(sorted(latest), dtype=np.int64)
        scalars[tag] = (steps, np.array([latest[step] for step in steps], dtype=np.float64))
    texts = {
        tag.removesuffix(TEXT_SUFFIX): {
            event.step: event.tensor_proto.string_val[0].decode() for event in logged.Tensors(tag)
        }
        for tag in logged.Tags()[events.TENSORS]
        if logged.SummaryMetadata(tag).plugin_data.plugin_name == "text"
    }
    return scalars, texts, notes


def number(value: float) -> str:
    """The shortest text that reads back as the same float32, TensorBoard's precision:
    12.333333, not 12.333333015441895; 12, not 12.0."""
    return np.format_float_positional(np.float32(value), trim="-")


def read_run(info: RunDirectory) -> tuple[ExportedRun, list[str]]:
    """(the run's rows from its TensorBoard events, none for a run that logged nothing, with how
    far it trained: its last step if it finished, else the last step it logged; notes on its
    events); an exported run's as exported (`results.read_export`). Its files to copy are
    checked. A periodic test's normalized score uses the no-op reference table, as the training
    loop's `eval/normalized_score` does; absent values are empty cells, and so is the
    normalized score of a game without human reference scores (MinAtar's)."""
    if not info.tensorboard.is_dir() and (info.path / TRAINING_RETURNS).is_file():
        return results.read_export(info), []
    results.whole_text(info.config_file)
    results.copied_files(info)
    scalars, texts, notes = read_events(info.tensorboard)
    normalized = info.environment_kind.has_human_reference
    episodes = dict(zip(*scalars.get(EPISODES_TAG, ((), ())), strict=True))
    scores = texts.get(EPISODE_SCORES_TAG, {})
    evaluations = [
        (
            str(step),
            str(step * info.frame_skip),
            "" if episodes.get(step) is None else str(int(episodes[step])),
            number(mean),
            number(normalized_score(mean, info.game, "noop")) if normalized else "",
            " ".join(map(number, json.loads(scores[step]) if step in scores else [])),
        )
        for step, mean in zip(*scalars.get(EVAL_TAG, ((), ())), strict=True)
    ]
    returns = [
        (str(step), str(step * info.frame_skip), number(value))
        for step, value in zip(*scalars.get(EPISODE_TAG, ((), ())), strict=True)
    ]
    # `<section>_vs_frames/*` tags are logged against frames (training.progress), not steps.
    logged = [int(steps[-1]) for tag, (steps, _) in scalars.items() if "_vs_frames/" not in tag]
    finished = info.final_snapshot.is_file()
    steps = info.total_steps if finished else max(logged, default=0)
    return ExportedRun(info, evaluations, returns, steps, finished), notes


def collect(paths: Sequence[Path], out: Path) -> tuple[list[ExportedRun], list[str]]:
    """(the runs below `paths` with something to export, notes on those left out and on scores
    without a run's config); each run once, however many of `paths` hold it. Earlier exports
    below `out` are not runs."""
    infos, notes = {}, []
    for path in map(Path, paths):
        runs = find_runs(path) if path.is_dir() else []
        strays = results.stray_scores(path, runs) if path.is_dir() else []
        found = [info for info in runs if Path(out).resolve() not in info.path.resolve().parents]
        if not found:
            raise ExportError(
                f"{path} holds no run: no config.yaml with a replay.kind below it (outside --out)"
            )
        outside = [stray for stray in strays if Path(out).resolve() not in stray.resolve().parents]
        notes += [f"{stray}: {results.STRAY}" for stray in outside]
        infos.update((info.path.resolve(), info) for info in found)
    runs = []
    for run, run_notes in map(read_run, infos.values()):
        notes += [f"{run.info.path}: {note}" for note in run_notes]
        if run.evaluation_rows or run.return_rows:
            runs.append(run)
        else:
            notes.append(
                f"{run.info.path}: no `{EVAL_TAG}` or `{EPISODE_TAG}` logged, not exported"
            )
    if not runs:
        raise ExportError(f"no run below {', '.join(map(str, paths))} has logged any score")
    return runs, notes


def exported_config(target: Path) -> dict | None:
    """The config of the run exported at `target`; None without one: no config.yaml, or one
    that holds no run's (an export from before writes were whole, stopped while writing it)."""
    exported = RunDirectory(target)
    return exported.config if exported.config_file.is_file() and exported.kind else None


def check_destinations(runs: Sequence[ExportedRun], out: Path) -> None:
    """Refuses two runs with one destination, a destination that holds the export of a run
    with another config, and one that cannot be written."""
    claimed: dict[Path, ExportedRun] = {}
    for run in runs:
        target = destination(run.info, out, run.finished)
        if target in claimed:
            raise ExportError(
                f"{claimed[target].info.path} and {run.info.path} would both be exported to "
                f"{target}; export them to separate --out"
            )
        claimed[target] = run
        # Settings, not bytes: a newer version may write the same settings in another order.
        if exported_config(target) not in (None, run.info.config):
            raise ExportError(
                f"{target} holds the export of a run with another config; delete it or choose "
                "another --out"
            )
        if (reason := unwritable_reason(target)) is not None:
            raise ExportError(f"cannot write {target}: {reason}")


def write(run: ExportedRun, directory: Path) -> Path:
    """The run's files into `directory` (made if needed), each whole or not at all, config.yaml
    last; returns it. A run without a provenance.yaml gets one that records no start: its code
    is unknown."""
    info = run.info
    directory.mkdir(parents=True, exist_ok=True)
    for name, columns, rows in (
        (EVALUATIONS, results.EVALUATION_COLUMNS, run.evaluation_rows),
        (TRAINING_RETURNS, results.RETURN_COLUMNS, run.return_rows),
    ):
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([columns, *(rows or [])])
        write_atomically(directory / name, text.getvalue().encode("utf-8"))
    for source in results.copied_files(info):
        write_atomically(directory / source.name, source.read_bytes())
    recorded = info.provenance_file.read_bytes() if info.provenance_file.is_file() else b""
    write_atomically(directory / PROVENANCE, recorded or f"{NOT_RECORDED}starts: []\n".encode())
    trained = (
        f"# How far the run had trained when it was exported; finished: it had written its "
        f"final snapshot ({FINAL_SNAPSHOT}).\nsteps: {run.steps}\nframes: {run.trained_frames}\n"
        f"finished: {str(run.finished).lower()}\n"
    )
    write_atomically(directory / TRAINED, trained.encode("utf-8"))
    write_atomically(directory / CONFIG, info.config_file.read_bytes())
    return directory


def remove_unfinished(run: ExportedRun, out: Path) -> None:
    """A finished run's export replaces its unfinished one, if that is this run's (its config):
    that export's files are removed, and its directory once empty."""
    earlier = destination(run.info, out, finished=False)
    if not run.finished or exported_config(earlier) != run.info.config:
        return
    copies = results.copied_files(RunDirectory(earlier))
    for path in (*copies, *(earlier / name for name in (TRAINED, EVALUATIONS, TRAINING_RETURNS))):
        path.unlink(missing_ok=True)
    for name in (PROVENANCE, CONFIG):  # the run's config last: a run until the end
        (earlier / name).unlink()
    if not any(earlier.iterdir()):
        earlier.rmdir()


def export_scratch(directories: Sequence[Path], scratch: Path) -> tuple[dict[Path, Path], list]:
    """Every run at or below `directories` (run directories or exports) written into `scratch`
    for a report, at its path relative to its directory below that directory's number: not
    export's own layout, where runs that differ in a setting the variant does not name (a
    sweep over α) would share a destination. Returns (each copy's directory -> the run's own,
    notes on scores without a run's config); raises ExportError for a directory without a
    run."""
    sources, notes = {}, []
    for number, directory in enumerate(directories):
        infos = find_runs(directory)
        notes += [
            f"{stray}: {results.STRAY}" for stray in results.stray_scores(Path(directory), infos)
        ]
        if not infos:
            raise ExportError(
                f"{directory} holds no run: no config.yaml with a replay.kind below it"
            )
        for info in infos:
            target = scratch / str(number) / info.path.relative_to(directory)
            sources[write(read_run(info)[0], target)] = info.path
    return sources, notes


def export_runs(paths: Sequence[Path], out: Path) -> tuple[list[Path], list[str]]:
    """(the directories written, notes on the runs left out); raises ExportError before
    writing anything."""
    runs, notes = collect(paths, out)
    check_destinations(runs, out)
    written = []
    for run in runs:
        written.append(write(run, destination(run.info, out, run.finished)))
        remove_unfinished(run, out)
    return written, notes
