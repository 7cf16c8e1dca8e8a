"""The MinAtar report's figures (`reporting.minatar`): per game the training return of each
variant against frames beside MinAtar's published DQN, and where a sweep varied one number, the
return at a frame count against that number."""

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from reporting.minatar_results import Cell, Reference, SeedBand
from reporting.plots import PUBLISHED_DQN_COLOUR, label, variant_colours
from reporting.results import count_name


def _published_dqn(axes, reference: Reference, first_frames: int, last_frames: int) -> None:
    """The published value at `first_frames` as a star there, at `last_frames` (beyond the
    runs) as a dashed line: the axis then ends with the runs instead of at `last_frames`."""
    note = "" if reference.comparable else " (older game version: not comparable)"
    if first_frames in reference.returns:
        axes.plot(
            first_frames / 1e6,
            reference.returns[first_frames],
            marker="*",
            markersize=12,
            linestyle="none",
            color=PUBLISHED_DQN_COLOUR,
            label=f"published DQN at {first_frames / 1e6:g}M{note}",
            clip_on=False,  # at the axis' right end when the runs end there
        )
    if last_frames in reference.returns:
        axes.axhline(
            reference.returns[last_frames],
            color=PUBLISHED_DQN_COLOUR,
            linestyle="--",
            linewidth=1,
            label=f"published DQN at {last_frames / 1e6:g}M{note}",
        )


def plot_minatar(
    title: str,
    bands: Sequence[SeedBand],
    reference: Reference | None,
    reference_frames: tuple[int, int],
    path: Path,
) -> None:
    """One MinAtar game: per variant its seeds' last-100 averages as thin lines and their mean
    over seeds as a thick line with a ± standard-error band, against frames; MinAtar's
    published DQN at `reference_frames` (`_published_dqn`). The x axis ends at the later of
    the runs' end and the first reference frame count."""
    figure = Figure(figsize=(7, 4.5), dpi=100)
    axes = figure.subplots()
    colours = variant_colours([(band.name, band.kind) for band in bands])
    for band in bands:
        colour = colours[band.name]
        for frames, curve in band.seeds:
            axes.plot(frames / 1e6, curve, color=colour, linewidth=0.5, alpha=0.4)
        millions = band.grid / 1e6
        legend = f"{label(band.name)} ({len(band.seeds)} seeds)"
        axes.plot(millions, band.mean, color=colour, linewidth=2, label=legend)
        low, high = band.mean - band.error, band.mean + band.error
        axes.fill_between(millions, low, high, color=colour, alpha=0.2, linewidth=0)
    end = max(band.grid[-1] for band in bands)
    if reference is not None:
        _published_dqn(axes, reference, *reference_frames)
        if reference_frames[0] in reference.returns:
            end = max(end, reference_frames[0])
    axes.set_xlim(0, end / 1e6)
    axes.set_title(f"MinAtar {title}: training return (last 100 episodes)")
    axes.set_xlabel("frames (millions)")
    axes.set_ylabel("return: mean ± s.e. over seeds")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, framealpha=0.5)
    figure.tight_layout()
    figure.savefig(path)


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
        setting = cell.variant.setting
        if len(setting.values) == 1 and _number(setting.values[0][1]) is not None:
            line = lines.setdefault((setting.game, setting.values[0][0]), {})
            line.setdefault(setting.variant, []).append(cell)
    return {
        place: variants
        for place, variants in lines.items()
        if max(len(line) for line in variants.values()) >= 2
    }


def plot_against_key(
    title: str, key: str, lines: dict[str, list[Cell]], baseline: Cell | None, path: Path
) -> None:
    """One game and swept key: per variant the last-100 return at the cells' frame count, mean
    ± standard error over seeds, against the key's value; the uniform baseline's mean dashed."""
    figure = Figure(figsize=(6, 4), dpi=100)
    axes = figure.subplots()
    frames = next(iter(lines.values()))[0].frames
    colours = variant_colours([(name, cells[0].variant.kind) for name, cells in lines.items()])
    for name, cells in lines.items():
        x = [_number(cell.variant.setting.values[0][1]) for cell in cells]
        mean, error = (np.array([cell.last[i] for cell in cells]) for i in (0, 1))
        seeds = "/".join(sorted({str(cell.seeds) for cell in cells}))
        axes.errorbar(
            x,
            mean,
            yerr=np.nan_to_num(error),
            color=colours[name],
            marker="o",
            capsize=3,
            label=f"{label(name)} ({seeds} seeds)",
        )
    if baseline is not None:
        axes.axhline(
            baseline.last[0],
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"{baseline.variant.name} ({baseline.seeds} seeds)",
        )
    axes.set_title(f"MinAtar {title}: last 100 episodes at {count_name(frames)} frames")
    axes.set_xlabel(key)
    axes.set_ylabel("return: mean ± s.e. over seeds")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, framealpha=0.5)
    figure.tight_layout()
    figure.savefig(path)
