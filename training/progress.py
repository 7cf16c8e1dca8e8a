"""TensorBoard scalars and figures, and the console progress bar, of a training run."""

import functools
import math
import os
import shlex
import shutil
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from artifacts.event_files import EVENT_FILES, first_damage
from artifacts.run_directory import RunDirectory
from training.run_state import marked, select

HPARAMS = "hparams"  # the folder below tensorboard/ with the hyperparameters and results
HYPERPARAMETERS = marked("hyperparameter")  # what a sweep varies


def write_scalars(writer: SummaryWriter, scalars: dict[str, float], step: int) -> None:
    """`scalars` at `step` in one TensorBoard event. Each tag reads back with the value and
    step `writer.add_scalar` gives it (a float32 `simple_value`), but the event is built,
    serialized and checksummed once, not once a scalar: the writer's thread computes its
    CRC-32C in pure Python, holding the interpreter lock the training loop needs."""
    values = [Summary.Value(tag=tag, simple_value=float(value)) for tag, value in scalars.items()]
    writer._get_file_writer().add_summary(Summary(value=values), step)


def check_event_files(run_dir: Path, progress_state: dict) -> list[str]:
    """The run's event files as far as its checkpoint (`Progress.state_dict`'s
    `progress_state`) recorded them must be readable to the end, or the resumed run's curves
    would silently lose every event after a damaged record (TensorBoard's reader stops
    there): a record that fails its checksum is a one-line ValueError; a file shorter than
    recorded (its end lost, as in a crash before it reached the disk) gives a warning naming
    what is lost, returned."""
    directory, warnings = RunDirectory(run_dir).tensorboard, []
    for name, recorded in sorted(progress_state["event_files"].items()):
        path = directory / name
        size = path.stat().st_size if path.is_file() else 0
        damage = first_damage(path, int(recorded)) if size else None
        if damage is not None and not damage.cut_short:
            raise ValueError(
                f"{damage}: the events from there on would drop out of the run's curves; "
                f"restore the file, or cut it there (truncate -s {damage.offset} "
                f"{shlex.quote(str(path))}) to resume without them"
            )
        if size < int(recorded):
            warnings.append(
                f"warning: event file {path} holds {size} of the {recorded} bytes its checkpoint "
                f"recorded: the events past byte {damage.offset if damage else size} are lost"
            )
    return warnings


def _writer_failures_told_once(arguments: threading.ExceptHookArgs) -> None:
    """threading's excepthook, but silent for a write the disk refused in the TensorBoard
    writer's own thread: the writer raises that error again in the loop's thread, at its next
    write, which reports it in one line (train.py)."""
    thread, error = arguments.thread, arguments.exc_value
    if not (isinstance(thread, _AsyncWriterThread) and isinstance(error, OSError)):
        threading.__excepthook__(arguments)


class Progress:
    """Logs episodes as they end and averages learning statistics over each log period.

    Everything but the clock is in `state_dict`, so a resumed run continues its curves with
    the same values. `state_dict` flushes the event files and records their sizes; resuming
    (`load_state_dict`) cuts them back to those sizes and deletes newer ones, so the events a
    killed run wrote after its last checkpoint disappear from every tag, whatever its x-axis
    (TensorBoard's own `purge_step` purges by step number, which would also delete the
    `episode_vs_frames/*` points, logged at step x frame_skip, before the checkpoint). A fresh
    start (`start_step` 0) deletes the event files of an attempt killed before its first
    checkpoint. The writer is created on first use, after that clean-up.
    """

    def __init__(self, run_dir: Path, total_steps: int, frame_skip: int, start_step: int = 0):
        self.directory = RunDirectory(run_dir).tensorboard
        if start_step == 0:
            self._cut_event_files({})
        self.bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)
        self.frame_skip = frame_skip
        self.returns: deque[float] = deque(maxlen=10)
        self._start_period(start_step)

    def _start_period(self, step: int) -> None:
        self._clock, self._period_start = time.perf_counter(), step
        self._sums = {"loss": 0.0, "mean_q": 0.0, "mean_abs_td_error": 0.0, "mean_weight": 0.0}
        self._max_weight, self._updates = 0.0, 0

    @functools.cached_property
    def writer(self) -> SummaryWriter:
        threading.excepthook = _writer_failures_told_once
        return SummaryWriter(str(self.directory))

    def _cut_event_files(self, sizes: dict[str, int]) -> None:
        """Truncate each event file to its size in `sizes`; delete those not in it."""
        if "writer" in vars(self):
            raise RuntimeError("Progress.load_state_dict must come before anything is logged")
        for path in self.directory.glob(EVENT_FILES):
            if path.name in sizes:
                os.truncate(path, min(int(sizes[path.name]), path.stat().st_size))
            else:
                path.unlink()

    def learned(self, stats, weights: np.ndarray) -> None:
        self._sums["loss"] += stats.loss
        self._sums["mean_q"] += stats.mean_q
        self._sums["mean_abs_td_error"] += float(np.abs(stats.td_errors).mean())
        self._sums["mean_weight"] += float(weights.mean())
        self._max_weight = max(self._max_weight, float(weights.max()))
        self._updates += 1

    def episode(self, step: int, episode_return: float, length_frames: int) -> None:
        """The episode's return and length against agent steps and against frames: one event
        for each x-axis (both in one where a step is one frame, as on MinAtar)."""
        self.returns.append(episode_return)
        events: dict[int, dict[str, float]] = {}
        for axis, x in (("episode", step), ("episode_vs_frames", step * self.frame_skip)):
            values = {f"{axis}/return": episode_return, f"{axis}/length_frames": length_frames}
            events.setdefault(x, {}).update(values)
        for x, scalars in events.items():
            write_scalars(self.writer, scalars, x)

    def period(self, step: int, scalars: dict[str, float], replay) -> None:
        """Write this period's `scalars` (the loop's schedules and the optimizer's steps), the
        replay's and the learning averages, and move the progress bar."""
        scalars = {
            **scalars,
            "replay/size": len(replay),
            "replay/max_priority": replay.max_priority,
            "replay/nonfinite_td_errors": replay.nonfinite_td_errors,
            **replay.summary(),
        }
        if replay.priority_exponent is not None:  # uniform replay has no α
            scalars["replay/priority_exponent"] = replay.priority_exponent
        elapsed = time.perf_counter() - self._clock
        steps_per_second = (step - self._period_start) / max(elapsed, 1e-9)
        scalars["speed/steps_per_second"] = steps_per_second
        scalars["speed/frames_per_second"] = steps_per_second * self.frame_skip
        if self._updates:
            for name in ("loss", "mean_q", "mean_abs_td_error"):
                scalars[f"train/{name}"] = self._sums[name] / self._updates
            scalars["replay/mean_weight"] = self._sums["mean_weight"] / self._updates
            scalars["replay/max_weight"] = self._max_weight
        write_scalars(self.writer, scalars, step)
        last = f"{self.returns[-1]:.0f}" if self.returns else "-"
        mean = f"{np.mean(self.returns):.1f}" if self.returns else "-"
        self.bar.set_postfix_str(
            f"{steps_per_second:.0f} steps/s, return {last} (mean10 {mean})", refresh=False
        )
        self.bar.update(step - self._period_start)
        self._start_period(step)

    def replay_profile(self, step: int, replay) -> None:
        """The priority histogram and the paper's Figures 10 and 11 of the memory now."""
        errors, rates = replay.td_error_profile()
        self.writer.add_histogram("replay/priorities", replay.priorities(), step)
        self.writer.add_figure("replay/sorted_td_errors", sorted_td_errors_figure(errors), step)
        self.writer.add_figure(
            "replay/replay_rate_by_td_error", replay_rate_figure(errors, rates), step
        )

    def hyperparameters(self, cfg, best_score: float) -> None:
        """What a sweep varies, against the results, for TensorBoard's HPARAMS view."""
        present = ((key, select(cfg, key)) for key in HYPERPARAMETERS)
        values = {key: value for key, value in present if value is not None}
        metrics = {"hparams/final_return": float(np.mean(self.returns or [np.nan]))}
        if math.isfinite(best_score):
            metrics["hparams/best_eval_score"] = best_score
        # A run stopped after this and before its final snapshot writes them again when
        # resumed: the same values, which replace the first ones rather than adding a session.
        shutil.rmtree(self.directory / HPARAMS, ignore_errors=True)
        self.writer.add_hparams(values, metrics, run_name=HPARAMS)

    def state_dict(self) -> dict:
        """Flushes the writer first: every event logged so far is on disk, whole."""
        self.writer.flush()
        return {
            "event_files": {p.name: p.stat().st_size for p in self.directory.glob(EVENT_FILES)},
            "returns": list(self.returns),
            "period_start": self._period_start,
            "sums": dict(self._sums),
            "max_weight": self._max_weight,
            "updates": self._updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self._cut_event_files(state["event_files"])
        self.returns.extend(float(value) for value in state["returns"])
        self._period_start = int(state["period_start"])
        self._sums = {name: float(value) for name, value in state["sums"].items()}
        self._max_weight = float(state["max_weight"])
        self._updates = int(state["updates"])
        # The bar counts from the period's start, which may lie before the checkpoint's step:
        # from there its rate is measured too (else it would show a negative one).
        self.bar.n = self.bar.initial = self.bar.last_print_n = self._period_start

    def close(self) -> None:
        try:
            if "writer" in vars(self):
                self.writer.close()
        finally:
            self.bar.close()


def _axes():
    """A new figure; matplotlib is imported here, not at start-up (it costs a second)."""
    import matplotlib

    matplotlib.use("Agg")  # training runs headless
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(5, 3.5), layout="tight")


def sorted_td_errors_figure(errors: np.ndarray):
    """Last-seen |δ| of every replayed transition in memory, sorted (Figure 10)."""
    errors = np.sort(errors[np.isfinite(errors)])[::-1]
    figure, axes = _axes()
    axes.plot(np.linspace(0, 1, len(errors)), errors)
    axes.set(xlabel="fraction of replayed transitions, sorted", ylabel="last-seen |δ|")
    return figure


def replay_rate_figure(errors: np.ndarray, rate: np.ndarray, bins: int = 20):
    """Replays per added transition since insertion, against last-seen |δ| (cf. Figure 11)."""
    seen = np.isfinite(errors)
    figure, axes = _axes()
    if seen.any():
        span = (0, errors[seen].max() + 1e-9)
        counts, edges = np.histogram(errors[seen], bins, span)
        sums, _ = np.histogram(errors[seen], bins, span, weights=rate[seen])
        centres = (edges[:-1] + edges[1:]) / 2
        axes.plot(centres[counts > 0], sums[counts > 0] / counts[counts > 0], marker="o")
    axes.set(xlabel="last-seen |δ|", ylabel="replays per added transition")
    return figure
