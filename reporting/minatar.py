"""MinAtar: prioritized against uniform replay in training return, beside MinAtar's published DQN.

    python -m reporting minatar results --out results/minatar_report

Reads only the MinAtar runs that `python -m reporting export` wrote below RESULTS_DIR
(minatar/<game>/<variant>/seed*/: config.yaml, training_returns.csv, and evaluations.csv for how
far a run trained) and writes into OUT one minatar_<game>.png per game (each variant's
last-100-episode training return against frames, mean ± standard error over seeds, each seed
thin, MinAtar's published DQN marked) and report.md: per game and variant at 0.5M and 1M
frames, the training return over seeds and each prioritized variant's difference to uniform
with a 95 % Welch interval. Runs may be unfinished: a run counts where it has trained.
"""

import math
import sys
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from artifacts.run_directory import RunDirectory
from reporting.markdown import format_interval, format_mean_error, format_score, markdown_row
from reporting.minatar_results import (
    FAMILY,
    GRID_POINTS,
    Cell,
    Reference,
    SeedBand,
    VariantRuns,
    cells_at,
    published_dqn,
    read_variants,
    seed_band,
)
from reporting.plots import PUBLISHED_DQN_COLOUR, label, variant_colours
from reporting.results import count_name, read_results
from reporting.seed_statistics import LAST_EPISODES, RUNNING_AVERAGE_RATE

CHECKPOINTS = (500_000, 1_000_000)
REFERENCE_FRAMES = (1_000_000, 5_000_000)  # MinAtar's published DQN: a star, a dashed line
TABLE_HEADER = (
    "| game | variant | seeds | last 100 | running average | published DQN at 1M | "
    "Δ last 100 vs uniform [95 % CI] | Δ running average vs uniform [95 % CI] |\n"
    "|---|---|---|---|---|---|---|---|"
)


def game_title(game: str) -> str:
    return game.replace("_", " ").title()


def _epsilon_end(info: RunDirectory) -> str:
    """The frame count where ε reaches its final value (learning start + decay)."""
    start, decay = (
        info.setting("train", k) for k in ("learning_start_steps", "epsilon_decay_steps")
    )
    return "?" if None in (start, decay) else count_name((start + decay) * info.frame_skip)


def protocol(variants: Sequence[VariantRuns]) -> str:
    """The settings a reader needs to hold the numbers next to published ones, as the runs'
    configs give them (values that differ between runs joined by /)."""
    infos = [run.info for variant in variants for run in variant.runs]

    def values(value) -> str:
        return " / ".join(sorted({str(value(info)) for info in infos}))

    return (
        "The measure is the **training return**: the return of the episodes played while "
        f"learning, ε-greedy with ε {values(lambda i: i.setting('train', 'epsilon_final'))} "
        f"after {values(_epsilon_end)} frames; sticky actions "
        f"{values(lambda i: i.setting('env', 'repeat_action_probability'))}; "
        f"{values(lambda i: count_name(i.total_frames))} frames per run, one agent step per "
        "frame. That is what MinAtar's published learning curves show; no separate test."
    )


def _published_cell(game: str) -> str:
    reference = published_dqn().get(game)
    if reference is None or REFERENCE_FRAMES[0] not in reference.returns:
        return "–"
    mark = "" if reference.comparable else " †"
    return format_score(reference.returns[REFERENCE_FRAMES[0]]) + mark


def _difference_cell(versus: tuple[float, float, float] | None) -> str:
    return "–" if versus is None else format_interval(*versus)


def cell_row(cell: Cell) -> str:
    variant = cell.variant
    return markdown_row(
        [
            game_title(variant.game),
            variant.name,
            f"{cell.seeds} of {len(variant.runs)}",
            format_mean_error(*cell.last),
            format_mean_error(*cell.running),
            _published_cell(variant.game),
            _difference_cell(cell.last_versus_uniform),
            _difference_cell(cell.running_versus_uniform),
        ]
    )


def verdicts(cells: Sequence[Cell]) -> list[str]:
    """One sentence per difference whose interval excludes zero."""
    found = []
    for cell in cells:
        measures = (
            (f"last-{LAST_EPISODES} average", cell.last_versus_uniform),
            ("running average", cell.running_versus_uniform),
        )
        for measure, versus in measures:
            if versus is None or not (versus[2] < 0 or versus[1] > 0):
                continue  # NaN bounds compare False: no interval, no verdict
            side, verdict = ("below", "worse") if versus[2] < 0 else ("above", "better")
            found.append(
                f"- {game_title(cell.variant.game)}, {cell.variant.name}: the {measure} "
                f"difference {format_interval(*versus)} lies entirely {side} zero: {verdict} "
                f"than {cell.variant.baseline}."
            )
    return found


def checkpoint_section(variants: Sequence[VariantRuns], frames: int) -> list[str]:
    cells = cells_at(variants, frames)
    title = f"## At {count_name(frames)} frames"
    if not cells:
        furthest = max(run.trained_frames for variant in variants for run in variant.runs)
        return [
            title,
            "",
            f"No run has trained that far yet (the furthest: {furthest:,} frames).",
            "",
        ]
    differences = [cell.last_versus_uniform for cell in cells if cell.last_versus_uniform]
    found = verdicts(cells)
    if not differences:
        found = [
            "No prioritized variant has trained this far beside a uniform run of its target rule."
        ]
    elif all(math.isnan(low) for _, low, _ in differences):
        found = [
            "No interval yet: each prioritized variant that trained this far has one seed, and "
            "an interval needs two a side."
        ]
    elif not found:
        found = [
            "No interval lies entirely below or above zero: no prioritized variant "
            "differs from uniform beyond what these seeds can resolve."
        ]
    return [title, "", TABLE_HEADER, *map(cell_row, cells), "", *found, ""]


def explanation() -> list[str]:
    rate = RUNNING_AVERAGE_RATE
    return [
        f"*last 100*: per seed, the average return of its last {LAST_EPISODES} episodes that "
        "ended at or before the frame count (all of them while fewer had ended). *running "
        f"average*: MinAtar's own (examples/dqn.py), avg ← {1 - rate:g}·avg + {rate:g}·G over "
        "every episode up to then, from avg = 0: it lags by about 100 episodes. Both are mean ± "
        "standard error over seeds (sample standard deviation / √n; – with one seed).",
        "",
        "*seeds*: the runs that trained that far, of the variant's runs. A run counts if its "
        "last episode ended at or beyond the frame count, or it logged a periodic test there or "
        "later (a finished run's last episode is cut off at its budget, unlogged).",
        "",
        "*Variants*: the replay kind; `dqn-` in front: MinAtar's DQN target max_a Q_target(s', "
        "a), without it this project's Double DQN target; behind it, a priority signal other "
        "than the paper's |δ| (`-huber_loss`: the Huber loss, as the published MinAtar "
        "prioritized agent) and an eviction other than the oldest first (`-lowest_priority`).",
        "",
        "*published DQN at 1M*: MinAtar's DQN (Young & Tian 2019; uniform replay, DQN target: "
        "compare with dqn-uniform) read off the MinAtar README's figure, about ±10 % "
        "(reporting/data/README.md). † Seaquest's predates MinAtar 1.0.11's oxygen fix: not "
        "comparable with today's game.",
        "",
        "*Δ vs uniform*: a prioritized variant minus the uniform variant of the same target "
        "rule (dqn-X − dqn-uniform, X − uniform): the difference of the means over seeds, and "
        "its 95 % confidence interval by Welch's t (difference ± t₀.₉₇₅(ν)·√(s₁²/n₁ + s₂²/n₂), "
        "ν by Welch–Satterthwaite; no equal variances assumed). With 3 seeds a side ν is 2 to 4 "
        "and t₀.₉₇₅ 2.8 to 4.3: the interval is wide, and only a large, consistent difference "
        "leaves out zero. – where either side has a single seed.",
        "",
    ]


def markdown(
    results_dir: Path, variants: Sequence[VariantRuns], figures: Sequence[str], notes: Sequence[str]
) -> str:
    runs = sum(len(variant.runs) for variant in variants)
    games = len({variant.game for variant in variants})
    lines = [
        f"# MinAtar: prioritized against uniform replay: `{results_dir}`",
        "",
        f"Runs: {runs} in {len(variants)} game × variant groups; games: {games}. "
        + protocol(variants),
        "",
        *explanation(),
        *(line for frames in CHECKPOINTS for line in checkpoint_section(variants, frames)),
        "## Figures",
        "",
        f"Per seed (thin lines) the average return of its last {LAST_EPISODES} episodes at "
        "each episode's end; thick: their mean over the seeds that trained that far, on "
        f"{GRID_POINTS} equal steps of frames, with a ± standard-error band. Star: MinAtar's "
        "published "
        "DQN at 1M frames; dashed line: at 5M frames (beyond these runs).",
        "",
        *[f"![{name}]({name})" for name in figures],
    ]
    if notes:
        lines += ["", "## Left out", "", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


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


def build(results_dir: Path, out: Path) -> Path:
    """Writes the figures and report.md into `out`; returns report.md's path. A directory
    without exported MinAtar runs is a one-line ValueError naming it, before anything is
    written."""
    variants, notes = read_variants(results_dir)
    if not variants:
        raise ValueError(
            f"{results_dir} holds no exported MinAtar run (config.yaml with env.kind minatar "
            "beside a training_returns.csv); export runs with: "
            "python -m reporting export RUN_DIR --out DIR"
        )
    notes += [
        f"{count} {family} run(s) left out (not MinAtar): python -m reporting published"
        for family, count in read_results(results_dir, FAMILY)[1].items()
    ]
    for note in notes:  # in report.md too: said here, so that no run is left out unseen
        print(f"note: {note}", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    for game in dict.fromkeys(variant.game for variant in variants):  # in report order
        ours = [variant for variant in variants if variant.game == game]
        end = max(run.trained_frames for variant in ours for run in variant.runs)
        figures.append(f"minatar_{game}.png")
        bands = [seed_band(variant, end) for variant in ours]
        reference = published_dqn().get(game)
        plot_minatar(game_title(game), bands, reference, REFERENCE_FRAMES, out / figures[-1])
    (out / "report.md").write_text(markdown(results_dir, variants, figures, notes))
    return out / "report.md"
