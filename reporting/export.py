"""Exports runs into a small, publishable results directory.

    python -m reporting export RUN_OR_MULTIRUN_DIR [...] --out results

Each Atari run goes to OUT/<game>/<variant>/seed<seed>_<budget>/ (results/pong/proportional/
seed0_10M/), a run of another family below OUT/<family>/ (results/minatar/breakout/dqn-uniform/
seed0_1M/), a run that has not finished (no final snapshot) to that name ending in `_unfinished`,
which its finished export replaces; an unfinished export that trained further than the run has
now (a run lost with its machine and started again) is kept. Its files (`reporting.results`):
config.yaml and provenance.yaml copied (one that says the code is unknown for a run from before
runs recorded it), its periodic tests, its training episodes and how far it trained; copied
where the run has them, changes.yaml and evaluate.py's reports. No checkpoint, snapshot or event
file. The variant names what differs from the paper's agent and replay
(`run_directory.variant_name`).

Everything is checked before anything is written, and each file written whole or not at all,
config.yaml last: an export that fails part-way leaves no file cut and no run without its files,
and running it again works. This is the one reader of TensorBoard events; an exported run given
again is read from its own files.
"""

import csv
import io
import json
import sys
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


def destination(info: RunDirectory, out: Path, finished: bool) -> Path:
    """Where the run of `info` is exported below `out` (the module docstring's layout)."""
    below = out if info.family == results.ATARI_FAMILY else out / info.family
    budget = results.count_name(info.total_frames) + ("" if finished else UNFINISHED)
    return below / info.game / info.variant / f"seed{info.seed}_{budget}"


def read_events(directory: Path) -> tuple[dict, dict, list[str]]:
    """(tag -> (steps, values) of every scalar, tag of add_text -> {step: text}, notes) of the
    event files, each record checked first (TensorBoard's reader drops, silently, every event
    from a damaged one on): a ValueError names the first that fails its checksum, a file cut
    inside its last record (a run stopped while writing it) gets a note. A step logged twice (a
    resumed run repeating a stretch) keeps its last value."""
    if not directory.is_dir():
        return {}, {}, []
    notes = []
    for path in sorted(directory.glob(EVENT_FILES)):
        damage = first_damage(path)
        if damage is not None and not damage.cut_short:
            raise ValueError(
                f"{damage}: the events from there on would be missing from the export; restore "
                f"the file, or cut it there (truncate -s {damage.offset} {path}) to export the "
                "events before it"
            )
        if damage is not None:
            notes.append(f"{damage}: the event there is not exported (stopped while writing it?)")
    every = {events.SCALARS: 0, events.TENSORS: 0}  # no reservoir sampling
    logged = events.EventAccumulator(str(directory), size_guidance=every)
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
    """The shortest text that reads back as the same float32: 12.333333, not 12.3333330154; 12."""
    return np.format_float_positional(np.float32(value), trim="-")


def read_run(info: RunDirectory) -> tuple[ExportedRun, list[str]]:
    """(the run as exported, from its events: trained to its last step if it finished, else to
    the last step it logged; notes on its events), its files to copy checked; an exported run
    as it is. A normalized score uses the no-op reference table as the training loop does; an
    absent value, or a normalized score without human reference scores (MinAtar), is empty."""
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


def collect(paths: Sequence[Path], out: Path | None = None) -> tuple[list[ExportedRun], list[str]]:
    """(the runs below `paths` (`read_run`), each once; notes on their events and on scores
    without a run's config); earlier exports below `out` are not runs. A ValueError names a
    path without a run."""
    infos, notes = {}, []

    def outside(directory: Path) -> bool:
        return out is None or Path(out).resolve() not in directory.resolve().parents

    for path in map(Path, paths):
        runs = find_runs(path) if path.is_dir() else []
        strays = results.stray_scores(path, runs) if path.is_dir() else []
        if not any(outside(info.path) for info in runs):
            where = " (outside --out)" if out else ""
            raise ValueError(
                f"{path} holds no run: no config.yaml with a replay.kind below it{where}"
            )
        notes += [f"{stray}: {results.STRAY}" for stray in strays if outside(stray)]
        infos.update((info.path.resolve(), info) for info in runs if outside(info.path))
    runs = []
    for run, run_notes in map(read_run, infos.values()):
        runs.append(run)
        notes += [f"{run.info.path}: {note}" for note in run_notes]
    return runs, notes


def exported_config(target: Path) -> dict | None:
    """The config exported at `target`, or None (none there, or an empty one: cut short)."""
    exported = RunDirectory(target)
    return exported.config if exported.config_file.is_file() and exported.kind else None


def check_destinations(runs: Sequence[ExportedRun], out: Path) -> None:
    """Refuses two runs with one destination, a destination that holds the export of a run
    with another config, and one that cannot be written."""
    claimed: dict[Path, ExportedRun] = {}
    for run in runs:
        target = destination(run.info, out, run.finished)
        if target in claimed:
            raise ValueError(
                f"{claimed[target].info.path} and {run.info.path} would both be exported to "
                f"{target}; export them to separate --out"
            )
        claimed[target] = run
        # Settings, not bytes: a newer version may write the same settings in another order.
        if exported_config(target) not in (None, run.info.config):
            another = "holds the export of a run with another config"
            raise ValueError(f"{target} {another}; delete it or choose another --out")
        if (reason := unwritable_reason(target)) is not None:
            raise ValueError(f"cannot write {target}: {reason}")


def write(run: ExportedRun, directory: Path) -> Path:
    """The run's files into `directory`, each whole or not at all, config.yaml last; returns
    it. A run without a provenance.yaml gets one that records no start: its code is unknown."""
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


def unfinished_export(run: ExportedRun, out: Path) -> Path | None:
    """The run's unfinished export below `out`, if one holds this run's config."""
    earlier = destination(run.info, out, finished=False)
    return earlier if exported_config(earlier) == run.info.config else None


def remove_unfinished(run: ExportedRun, out: Path) -> None:
    """A finished run's export replaces its unfinished one, if that is this run's (its config):
    its files go, then its directory if empty."""
    earlier = unfinished_export(run, out) if run.finished else None
    if earlier is None:
        return
    copies = results.copied_files(RunDirectory(earlier))
    for path in (*copies, *(earlier / name for name in (TRAINED, EVALUATIONS, TRAINING_RETURNS))):
        path.unlink(missing_ok=True)
    for name in (PROVENANCE, CONFIG):  # the run's config last: a run until the end
        (earlier / name).unlink()
    if not any(earlier.iterdir()):
        earlier.rmdir()


def further_export(run: ExportedRun, out: Path) -> str | None:
    """Why `run` is not exported: its unfinished export below `out` trained further (the run
    was lost with its machine and started again from its first step); else None."""
    target = None if run.finished else unfinished_export(run, out)
    if target is None:
        return None
    earlier = results.read_export(RunDirectory(target)).trained_frames
    if earlier <= run.trained_frames:
        return None
    return (
        f"trained {run.trained_frames:,} frames, not exported: {target} holds its export to "
        f"{earlier:,} frames, kept (delete it to export this run)"
    )


def build(paths: Sequence[Path], out: Path) -> list[Path]:
    """Exports the runs below `paths` into `out`; returns the directories written. The notes
    on runs left out (those that logged no score, or whose export trained further) go to
    stderr. Raises ValueError before writing anything."""
    runs, notes = collect(paths, out)
    logged = [run for run in runs if run.evaluation_rows or run.return_rows]
    notes += [
        f"{run.info.path}: no `{EVAL_TAG}` or `{EPISODE_TAG}` logged, not exported"
        for run in runs
        if run not in logged
    ]
    if not logged:
        raise ValueError(f"no run below {', '.join(map(str, paths))} has logged any score")
    behind = {run: reason for run in logged if (reason := further_export(run, out))}
    notes += [f"{run.info.path}: {reason}" for run, reason in behind.items()]
    logged = [run for run in logged if run not in behind]
    check_destinations(logged, out)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    written = []
    for run in logged:
        written.append(write(run, destination(run.info, out, run.finished)))
        remove_unfinished(run, out)
    return written
