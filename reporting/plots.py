"""The reports' figures: the sweep's learning curves per game (median and interquartile range
over seeds, as the paper's Figure 8) and learning-speed summary (Figure 4); exported runs beside
Dopamine's published curves; MinAtar's training returns beside its published DQN."""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.figure import Figure  # no pyplot: no global state, no display backend

from envs.games import resolve_game
from evaluation.scores import reference_scores
from reporting import curves
from reporting.sweep_report import Group, Report

if TYPE_CHECKING:  # published.py and minatar.py draw with this module: no import cycle
    from reporting.minatar_results import Reference, SeedBand
    from reporting.published import Band, Variant

# The paper's colours: black uniform, red rank-based, blue proportional.
COLOURS = {"uniform": "black", "rank_based": "red", "proportional": "blue"}
LABELS = {
    "uniform": "uniform (Double DQN)",
    "rank_based": "rank-based",
    "proportional": "proportional",
}
DOPAMINE_COLOURS = {"DQN": "darkorange", "Rainbow": "purple"}
PUBLISHED_DQN_COLOUR = DOPAMINE_COLOURS["DQN"]  # any published DQN, Dopamine's or MinAtar's
# For a second variant of one replay kind in a figure (another target rule or priority signal).
OTHER_COLOURS = ("tab:green", "tab:cyan", "tab:brown", "tab:pink", "tab:olive", "tab:gray")


def _colour(kind: str) -> str:
    return COLOURS.get(kind, "grey")


def variant_colours(variants: Sequence[tuple[str, str]]) -> dict[str, str]:
    """(variant name, replay kind) in drawing order -> colour: the first variant of each kind
    the paper's colour of its kind, every other one the next of OTHER_COLOURS, so that no two
    variants of one figure share a colour (up to their number)."""
    colours, spare = {}, iter(OTHER_COLOURS)
    for name, kind in variants:
        taken = _colour(kind) in colours.values() or kind not in COLOURS
        colours[name] = next(spare, "grey") if taken else _colour(kind)
    return colours


def plot_learning_curves(groups: Sequence[Group], bins: int, ylabel: str, path: Path) -> None:
    """One game: each variant's median over seeds with its interquartile band; the no-op
    human score dashed green."""
    game = resolve_game(groups[0].game)
    figure = Figure(figsize=(6, 4), dpi=100)
    axes = figure.subplots()
    for group in groups:
        steps = curves.fractions(bins) * group.total_steps
        low, median, high = curves.quartiles(group.curves)
        label = f"{LABELS.get(group.kind, group.kind)} ({len(group.seeds)} seeds)"
        axes.plot(steps, median, color=_colour(group.kind), label=label, linewidth=1.5)
        axes.fill_between(steps, low, high, color=_colour(group.kind), alpha=0.2, linewidth=0)
    _, human = reference_scores(game.rom_id, "noop")
    axes.axhline(human, color="green", linestyle="--", linewidth=1, label="human")
    axes.set_title(game.name)
    axes.set_xlabel("agent steps")
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)


def _band(axes, band: "Band", colour: str, label: str, **line) -> None:
    millions = band.frames / 1e6
    axes.plot(millions, band.median, color=colour, label=label, linewidth=1.5, **line)
    axes.fill_between(millions, band.low, band.high, color=colour, alpha=0.15, linewidth=0)


def plot_published(
    variants: Sequence["Variant"], dopamine: Mapping[str, "Band"], path: Path
) -> None:
    """One game: each variant's periodic-test score (median, min–max band over runs) and
    Dopamine's published curves dashed, against frames."""
    figure = Figure(figsize=(7, 4.5), dpi=100)
    axes = figure.subplots()
    colours = variant_colours([(variant.name, variant.kind) for variant in variants])
    for variant in variants:
        label = f"{LABELS.get(variant.name, variant.name)} ({len(variant.runs)} runs)"
        _band(axes, variant.band, colours[variant.name], label, marker=".")
    for agent, band in dopamine.items():
        # Markers too: a run shorter than 2M frames overlaps one Dopamine point only.
        _band(
            axes,
            band,
            DOPAMINE_COLOURS[agent],
            f"Dopamine {agent} (training returns, sticky actions; reference only)",
            linestyle="--",
            marker="x",
        )
    random_score, _ = reference_scores(variants[0].game, "noop")
    axes.axhline(random_score, color="grey", linestyle=":", linewidth=1, label="random (no-op)")
    axes.set_title(f"{resolve_game(variants[0].game).name}: periodic test (no-op starts)")
    axes.set_xlabel("emulator frames (millions)")
    axes.set_ylabel("score (median, min–max over runs)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, framealpha=0.5)  # see-through: points may lie behind it
    figure.tight_layout()
    figure.savefig(path)


def _published_dqn(axes, reference: "Reference", first_frames: int, last_frames: int) -> None:
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
    bands: Sequence["SeedBand"],
    reference: "Reference | None",
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
        label = f"{LABELS.get(band.name, band.name)} ({len(band.seeds)} seeds)"
        axes.plot(millions, band.mean, color=colour, linewidth=2, label=label)
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


def plot_learning_speed(report: Report, path: Path) -> None:
    """Figure 4: median over games of the baseline-normalized best-so-far (left) and
    mean-so-far (right) scores against the fraction of training, equivalence points dashed."""
    figure = Figure(figsize=(10, 4), dpi=100)
    panels = figure.subplots(1, 2, sharey=True)
    x = 100 * curves.fractions(report.bins)
    for axes, field, title in (
        (panels[0], "best", "maximum score so far"),
        (panels[1], "mean", "mean score so far"),
    ):
        for speed in report.speeds:
            curve = getattr(speed, f"{field}_so_far")
            point = getattr(speed, f"{field}_equivalence")
            axes.plot(
                x,
                100 * curve,
                color=_colour(speed.kind),
                label=f"{LABELS.get(speed.kind, speed.kind)}"
                + (f" (100 % at {100 * point:.0f} %)" if point is not None else ""),
            )
            if point is not None and speed.kind != curves.UNIFORM:
                axes.axvline(100 * point, color=_colour(speed.kind), linestyle="--", linewidth=1)
        axes.axhline(100, color="grey", linewidth=0.8)
        axes.set_title(
            f"{title} (median over {max(s.games for s in report.speeds)} games)", fontsize=10
        )
        axes.set_xlabel("training (%)")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    panels[0].set_ylabel("baseline-normalized score (%)")
    figure.tight_layout()
    figure.savefig(path)


def plot_all(report: Report, out: Path) -> list[str]:
    """Writes every figure into `out`; returns their file names."""
    names = []
    ylabel = "test score (no-op starts)" if report.tag == "eval/score" else "training return"
    for game in sorted({g.game for g in report.groups}):
        name = f"learning_curves_{game}.png"
        plot_learning_curves(
            [g for g in report.groups if g.game == game], report.bins, ylabel, out / name
        )
        names.append(name)
    if report.speeds:
        plot_learning_speed(report, out / "learning_speed.png")
        names.append("learning_speed.png")
    return names
