"""Reads the TensorBoard curves of runs (`artifacts.run_directory.find_runs` finds them).

The curve is the test evaluation (`eval/score`, logged against agent steps) when the sweep has
one, else the training episode returns (`episode/return`), which are noisier and played with
the training ε.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import (
    SCALARS,
    TENSORS,
    EventAccumulator,
)

from artifacts.run_directory import RunDirectory

EVAL_TAG = "eval/score"
EPISODE_TAG = "episode/return"


@dataclass(frozen=True)
class Run:
    info: RunDirectory
    tag: str
    steps: np.ndarray  # agent steps, increasing, one value each
    values: np.ndarray


TEXT_SUFFIX = "/text_summary"  # what SummaryWriter.add_text appends to the tag


def read_events(tensorboard_dir: Path) -> EventAccumulator | None:
    """Every event of the run's event files (no reservoir sampling); None without a
    directory (a run that never logged)."""
    if not tensorboard_dir.is_dir():
        return None
    accumulator = EventAccumulator(str(tensorboard_dir), size_guidance={SCALARS: 0, TENSORS: 0})
    accumulator.Reload()
    return accumulator


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


def read_scalars(tensorboard_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return scalars_of(read_events(tensorboard_dir))


def load_runs(infos: Sequence[RunDirectory]) -> tuple[list[Run], list[str]]:
    """(runs with a curve, notes on the runs left out).

    The tag is chosen once for the whole sweep, so no plot mixes test scores with training
    returns: `eval/score` if any run has it, else `episode/return`.
    """
    scalars = {info.path: read_scalars(info.tensorboard) for info in infos}
    has_eval = any(EVAL_TAG in curves for curves in scalars.values())
    tag = EVAL_TAG if has_eval else EPISODE_TAG
    runs, notes = [], []
    for info in infos:
        curve = scalars[info.path].get(tag)
        if curve is None or curve[0].size == 0:
            notes.append(f"{info.path}: no `{tag}` scalars, left out")
            continue
        runs.append(Run(info, tag, *curve))
    return runs, notes
