"""The MinAtar report's numbers and figures (`reporting.minatar`): each run's training returns
summarized, each group's statistics over seeds at a frame count, MinAtar's published DQN, per
game each group's training return against frames, and where a sweep varied one number, the
return at a frame count against that number. A run speaks for the frames it trained
(`results.ExportedRun.trained_frames`), no further.

A run's episodes are in the order they ended: `frames[i]` is the frame count at the end of
episode i (increasing) and `returns[i]` its return. A curve over episodes (`last_average`,
`running_average`) has one value per episode, the value after that episode ended.
"""

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from artifacts.run_directory import variant_name
from evaluation.scores import data_rows
from reporting import report
from reporting.curves import UNIFORM
from reporting.report import Group
from reporting.results import ExportedRun, count_name

GRID_POINTS = 200  # of the figures' mean over seeds
REFERENCE_FRAMES = (1_000_000, 5_000_000)  # MinAtar's published DQN: a star, a dashed line
RETURN_AXIS = "return: mean ± s.e. over seeds"
LAST_EPISODES = 100  # the window of the smoothed training return
# MinAtar's examples/dqn.py running average: avg ← (1 − rate)·avg + rate·G, from avg = 0.
RUNNING_AVERAGE_RATE = 0.01


def last_average(returns: ArrayLike, window: int = LAST_EPISODES) -> np.ndarray:
    """After each episode, the mean return of the last `window` episodes ended by then (all of
    them while fewer have ended)."""
    returns = np.asarray(returns, dtype=np.float64)
    sums = np.concatenate([[0.0], np.cumsum(returns)])
    ends = np.arange(1, returns.size + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def running_average(returns: ArrayLike, rate: float = RUNNING_AVERAGE_RATE) -> np.ndarray:
    """After each episode, MinAtar's running average avg ← (1 − rate)·avg + rate·G from 0: it
    weighs the last ~1 / rate episodes and starts biased towards 0 (that recursion, as a
    filter)."""
    from scipy.signal import lfilter  # only this report needs scipy: the others run without

    return lfilter([rate], [1.0, rate - 1.0], np.asarray(returns, dtype=np.float64))


def value_at(frames: ArrayLike, curve: ArrayLike, at: float) -> float:
    """The curve after the last episode that ended at or before `at` frames; NaN if none had."""
    index = int(np.searchsorted(frames, at, side="right")) - 1
    return float(curve[index]) if index >= 0 else np.nan


def on_grid(frames: ArrayLike, curve: ArrayLike, grid: ArrayLike, trained: float) -> np.ndarray:
    """`value_at` each grid point up to `trained` frames (how far the run is known to have
    trained), NaN beyond it: a run does not speak for frames it has not played."""
    grid = np.asarray(grid, dtype=np.float64)
    index = np.searchsorted(frames, grid, side="right") - 1
    known = (index >= 0) & (grid <= trained)
    values = np.full(grid.shape, np.nan)
    values[known] = np.asarray(curve, dtype=np.float64)[index[known]]
    return values


def mean_and_standard_error(values: ArrayLike) -> tuple:
    """Over the seeds (axis 0), NaN values left out: (mean, standard error = sample standard
    deviation / √n). The mean is NaN without a value, the standard error with fewer than two;
    floats for a 1-D input, arrays for 2-D."""
    values = np.asarray(values, dtype=np.float64)
    count = np.sum(~np.isnan(values), axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # empty or single columns: NaN, as wanted
        mean = np.nanmean(values, axis=0)
        deviation = np.nanstd(values, axis=0, ddof=1)
    error = np.where(count >= 2, deviation / np.sqrt(np.maximum(count, 1)), np.nan)
    mean = np.where(count >= 1, mean, np.nan)
    return mean[()], error[()]


def welch_interval(a: ArrayLike, b: ArrayLike, confidence: float = 0.95) -> tuple:
    """(mean(a) − mean(b), low, high): Welch's t interval for the difference of the means,
    which does not assume equal variances (scipy's). The bounds are NaN when either sample has
    fewer than two values (no variance to estimate), and equal the difference when both samples
    are constant. Everything is NaN when either sample is empty."""
    from scipy.stats import ttest_ind

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        return np.nan, np.nan, np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a single or constant sample: as said
        interval = ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
    return float(a.mean() - b.mean()), float(interval.low), float(interval.high)


@functools.cache
def averages(run: ExportedRun) -> tuple[np.ndarray, np.ndarray]:
    """(last-100 average, running average) after each of the run's training episodes."""
    returns = run.returns.values
    return last_average(returns), running_average(returns)


def baseline(group: Group) -> str | None:
    """The uniform variant the group is compared with (same target rule); None for uniform."""
    return None if group.kind == UNIFORM else variant_name(UNIFORM, group.runs[0].info.target_rule)


@dataclass(frozen=True)
class Cell:
    """One group at one frame count: over its runs that had trained and ended an episode by then
    (`reached`), mean and standard error of the last-100 average, the running average and the
    latest periodic test's score; each one's difference to the baseline (`welch_interval`)."""

    variant: Group
    frames: int
    reached: tuple[ExportedRun, ...]
    last: tuple[float, float]
    running: tuple[float, float]
    test: tuple[float, float]
    last_versus_uniform: tuple[float, float, float] | None
    running_versus_uniform: tuple[float, float, float] | None
    test_versus_uniform: tuple[float, float, float] | None

    @property
    def seeds(self) -> int:
        return len(self.reached)


def cells_at(groups: Sequence[Group], frames: int) -> list[Cell]:
    """A cell per group with a run that trained `frames` frames, in the order given."""
    measures = {}
    for group in groups:
        reached = [r for r in group.runs if r.trained_frames >= frames >= r.returns.frames[0]]
        at = functools.partial(value_at, at=frames)
        last, running = (
            np.array([at(r.returns.frames, averages(r)[i]) for r in reached]) for i in (0, 1)
        )
        scores = np.array(
            [at(r.tests.frames, r.tests.values) for r in reached if r.tests is not None]
        )
        measures[group.game, group.name] = (
            tuple(reached),
            [last, running, scores[~np.isnan(scores)]],
        )
    cells = []
    for group in groups:
        reached, ours = measures[group.game, group.name]
        theirs = measures.get((group.game, baseline(group)), ((), None))[1]
        versus = [None] * len(ours)
        if theirs is not None and theirs[0].size:
            versus = list(map(welch_interval, ours, theirs))
        statistics = map(mean_and_standard_error, ours)
        cells += [Cell(group, frames, reached, *statistics, *versus)] if reached else []
    return cells


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
    for row in data_rows("minatar_dqn_reference.csv", "reporting"):
        rows.setdefault(row["game"], []).append(row)
    return {
        game: Reference(
            {int(row["frames"]): float(row["dqn_training_return_approx"]) for row in members},
            not any("not comparable" in row["source"] for row in members),
        )
        for game, members in rows.items()
    }


def plot_minatar(title: str, groups: Sequence[Group], end: int, path: Path) -> None:
    """One MinAtar game: per group its seeds' last-100 averages as thin lines, and their mean
    over the seeds that trained that far as a thick line with a ± standard-error band on
    GRID_POINTS equal steps up to `end` frames; MinAtar's published DQN at REFERENCE_FRAMES, at
    the first as a star, at the second (beyond the runs) as a dashed line. The x axis ends at
    the later of `end` and the first reference frame count."""
    figure, panel = report.axes(7, 4.5)
    colours = report.variant_colours([(group.name, group.kind) for group in groups])
    grid = np.linspace(end / GRID_POINTS, end, GRID_POINTS)
    for group in groups:
        colour, rows = colours[group.name], []
        for run in group.runs:
            frames, curve = run.returns.frames, averages(run)[0]
            panel.plot(frames / 1e6, curve, color=colour, linewidth=0.5, alpha=0.4)
            rows.append(on_grid(frames, curve, grid, run.trained_frames))
        mean, error = mean_and_standard_error(rows)
        legend = f"{report.label(group.name)} ({len(group.runs)} seeds)"
        panel.plot(grid / 1e6, mean, color=colour, linewidth=2, label=legend)
        panel.fill_between(grid / 1e6, mean - error, mean + error, color=colour, alpha=0.2, lw=0)
    reference = published_dqn().get(groups[0].game)
    returns = {} if reference is None else reference.returns
    comparable = reference is None or reference.comparable
    note = "" if comparable else " (older game version: not comparable)"
    first, last = (f"published DQN at {frames / 1e6:g}M{note}" for frames in REFERENCE_FRAMES)
    dqn = report.DOPAMINE_COLOURS["DQN"]
    if REFERENCE_FRAMES[0] in returns:  # at the axis' right end when the runs end there
        star = dict(marker="*", markersize=12, linestyle="none", color=dqn, clip_on=False)
        panel.plot(REFERENCE_FRAMES[0] / 1e6, returns[REFERENCE_FRAMES[0]], label=first, **star)
        end = max(end, REFERENCE_FRAMES[0])
    if REFERENCE_FRAMES[1] in returns:  # a line, so that the axis ends with the runs
        panel.axhline(returns[REFERENCE_FRAMES[1]], color=dqn, ls="--", lw=1, label=last)
    panel.set_xlim(0, end / 1e6)
    title = f"MinAtar {title}: training return (last 100 episodes)"
    report.finish(panel, title, "frames (millions)", RETURN_AXIS, framealpha=0.5)
    report.save(figure, path)


def swept_lines(cells: Sequence[Cell]) -> dict[tuple[str, str], dict[str, list[Cell]]]:
    """(game, key) -> variant -> its cells, for each variant whose settings in that game vary
    one key, by number, in two or more of them (a sweep over α, say)."""
    lines: dict[tuple[str, str], dict[str, list[Cell]]] = {}
    for cell in cells:
        group = cell.variant
        if len(group.values) == 1 and report.as_number(group.values[0][1]) is not None:
            line = lines.setdefault((group.game, group.values[0][0]), {})
            line.setdefault(group.variant, []).append(cell)
    return {place: line for place, line in lines.items() if max(map(len, line.values())) >= 2}


def plot_against_key(title: str, key: str, lines, baseline: Cell | None, path: Path) -> None:
    """One game and swept key: per variant (`lines`: variant -> its cells) the last-100 return
    at the cells' frame count, mean ± standard error over seeds, against the key's value; the
    uniform baseline's mean dashed."""
    figure, panel = report.axes(6, 4)
    frames = next(iter(lines.values()))[0].frames
    colours = report.variant_colours(
        [(name, cells[0].variant.kind) for name, cells in lines.items()]
    )
    for name, cells in lines.items():
        x = [float(cell.variant.values[0][1]) for cell in cells]
        mean, error = (np.array([cell.last[i] for cell in cells]) for i in (0, 1))
        legend = f"{report.label(name)} ({'/'.join(sorted({str(c.seeds) for c in cells}))} seeds)"
        style = dict(color=colours[name], marker="o", capsize=3, label=legend)
        panel.errorbar(x, mean, yerr=np.nan_to_num(error), **style)
    if baseline is not None:
        legend = f"{baseline.variant.name} ({baseline.seeds} seeds)"
        panel.axhline(baseline.last[0], color="black", linestyle="--", linewidth=1, label=legend)
    title = f"MinAtar {title}: last 100 episodes at {count_name(frames)} frames"
    report.finish(panel, title, key, RETURN_AXIS, framealpha=0.5)
    report.save(figure, path)
