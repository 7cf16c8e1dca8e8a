"""The MinAtar report's numbers and figures (`reporting.minatar`): each group's statistics over
seeds at a frame count, MinAtar's published DQN, per game each group's training return against
frames, and where a sweep varied one number, the return at a frame count against that number.
A run's training returns are summarized as `seed_statistics` does, and a run speaks for the
frames it trained (`results.ExportedRun.trained_frames`), no further.
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from artifacts.run_directory import variant_name
from reporting import report, seed_statistics
from reporting.curves import UNIFORM
from reporting.report import Group
from reporting.results import ExportedRun, count_name, packaged_rows

GRID_POINTS = 200  # of the figures' mean over seeds
REFERENCE_FRAMES = (1_000_000, 5_000_000)  # MinAtar's published DQN: a star, a dashed line
RETURN_AXIS = "return: mean ± s.e. over seeds"


@functools.cache
def averages(run: ExportedRun) -> tuple[np.ndarray, np.ndarray]:
    """(last-100 average, running average) after each of the run's training episodes."""
    returns = run.returns.values
    return seed_statistics.last_average(returns), seed_statistics.running_average(returns)


def baseline(group: Group) -> str | None:
    """The uniform variant the group is compared with (same target rule); None for uniform."""
    return None if group.kind == UNIFORM else variant_name(UNIFORM, group.runs[0].info.target_rule)


@dataclass(frozen=True)
class Cell:
    """One group at one frame count: over its runs that trained that far (`reached`) and had
    ended an episode by then, the mean and standard error of the last-100 average, of the
    running average and of the latest periodic test's score (over the runs tested by then),
    and (a prioritized group beside its baseline) each one's difference to the baseline,
    `seed_statistics.welch_interval`'s triple; NaN where undefined."""

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
        values = [
            [
                seed_statistics.value_at(run.returns.frames, averages(run)[i], frames)
                for run in reached
            ]
            for i in (0, 1)
        ]
        tests = [run.tests for run in reached if run.tests is not None]
        scores = np.array([seed_statistics.value_at(t.frames, t.values, frames) for t in tests])
        values.append(scores[~np.isnan(scores)])
        measures[group.game, group.name] = (tuple(reached), [np.array(v) for v in values])
    cells = []
    for group in groups:
        reached, ours = measures[group.game, group.name]
        theirs = measures.get((group.game, baseline(group)), ((), None))[1]
        versus = [None] * len(ours)
        if theirs is not None and theirs[0].size:
            versus = [
                seed_statistics.welch_interval(*pair) for pair in zip(ours, theirs, strict=True)
            ]
        statistics = map(seed_statistics.mean_and_standard_error, ours)
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
    for row in packaged_rows("minatar_dqn_reference.csv"):
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
            rows.append(seed_statistics.on_grid(frames, curve, grid, run.trained_frames))
        mean, error = seed_statistics.mean_and_standard_error(rows)
        legend = f"{report.label(group.name)} ({len(group.runs)} seeds)"
        panel.plot(grid / 1e6, mean, color=colour, linewidth=2, label=legend)
        panel.fill_between(grid / 1e6, mean - error, mean + error, color=colour, alpha=0.2, lw=0)
    reference = published_dqn().get(groups[0].game)
    returns = {} if reference is None else reference.returns
    note = (
        "" if reference is None or reference.comparable else " (older game version: not comparable)"
    )
    first, last = (f"published DQN at {frames / 1e6:g}M{note}" for frames in REFERENCE_FRAMES)
    dqn = report.DOPAMINE_COLOURS["DQN"]
    if REFERENCE_FRAMES[0] in returns:  # at the axis' right end when the runs end there
        star = dict(marker="*", markersize=12, linestyle="none", color=dqn, clip_on=False)
        panel.plot(REFERENCE_FRAMES[0] / 1e6, returns[REFERENCE_FRAMES[0]], label=first, **star)
        end = max(end, REFERENCE_FRAMES[0])
    if REFERENCE_FRAMES[1] in returns:  # a line, so that the axis ends with the runs
        panel.axhline(
            returns[REFERENCE_FRAMES[1]], color=dqn, linestyle="--", linewidth=1, label=last
        )
    panel.set_xlim(0, end / 1e6)
    title = f"MinAtar {title}: training return (last 100 episodes)"
    report.finish(panel, title, "frames (millions)", RETURN_AXIS, framealpha=0.5)
    report.save(figure, path)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def swept_lines(cells: Sequence[Cell]) -> dict[tuple[str, str], dict[str, list[Cell]]]:
    """(game, key) -> variant -> its cells, for each variant whose settings in that game vary
    one key, by number, in two or more of them (a sweep over α, say)."""
    lines: dict[tuple[str, str], dict[str, list[Cell]]] = {}
    for cell in cells:
        group = cell.variant
        if len(group.values) == 1 and _number(group.values[0][1]) is not None:
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
        x = [_number(cell.variant.values[0][1]) for cell in cells]
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
