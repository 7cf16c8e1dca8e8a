"""MinAtar: prioritized against uniform replay in training return, beside MinAtar's published DQN.

    python -m reporting minatar results --out results/minatar_report

Reads only the MinAtar runs that `python -m reporting export` wrote below RESULTS_DIR
(minatar/<game>/<variant>/seed*/: config.yaml, training_returns.csv, and evaluations.csv for how
far a run trained) and writes into OUT one minatar_<game>.png per game (each variant's
last-100-episode training return against frames, mean ± standard error over seeds, each seed
thin, MinAtar's published DQN marked) and report.md: per game and variant at 0.5M and 1M
frames (and the runs' budget), the training return and the periodic test's score over seeds,
each prioritized variant's difference to uniform with a 95 % Welch interval, and the commits
that made its runs. Runs may
be unfinished: a run counts where it has trained. A variant whose runs differ in more than
their seed (a sweep over α) is one row per setting (`results.Setting`); where they vary one
number, minatar_<game>_<key>.png shows the return against it. The sweep report
(`python -m reporting DIR`) writes this report for a sweep's MinAtar runs.
"""

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from artifacts.run_directory import RunDirectory
from reporting.markdown import (
    format_interval,
    format_mean_error,
    format_score,
    markdown_row,
    report_end,
)
from reporting.minatar_figures import plot_against_key, plot_minatar, swept_lines
from reporting.minatar_results import (
    FAMILY,
    GRID_POINTS,
    Cell,
    VariantRuns,
    cells_at,
    published_dqn,
    read_variants,
    seed_band,
)
from reporting.results import count_name, read_results
from reporting.seed_statistics import LAST_EPISODES, RUNNING_AVERAGE_RATE

CHECKPOINTS = (500_000, 1_000_000)  # and the runs' budget (`report_frames`)
REFERENCE_FRAMES = (1_000_000, 5_000_000)  # MinAtar's published DQN: a star, a dashed line
TABLE_HEADER = (
    "| game | variant | seeds | last 100 | running average | published DQN at 1M | "
    "Δ last 100 vs uniform [95 % CI] | Δ running average vs uniform [95 % CI] | "
    "periodic test | Δ periodic test vs uniform [95 % CI] | code |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def game_title(game: str) -> str:
    return game.replace("_", " ").title()


def _epsilon_end(info: RunDirectory) -> str:
    """The frame count where ε reaches its final value (learning start + decay)."""
    start, decay = (
        info.setting("train", k) for k in ("learning_start_steps", "epsilon_decay_steps")
    )
    return "?" if None in (start, decay) else count_name((start + decay) * info.frame_skip)


def _test_frames(info: RunDirectory, key: str) -> str:
    """The periodic test's `evaluation.<key>` frame count, ? where the config has none."""
    count = info.setting("evaluation", key)
    return "?" if count is None else count_name(count)


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
        "frame. That is what MinAtar's published learning curves show. Beside it, the runs' "
        f"periodic test: every {values(lambda i: _test_frames(i, 'every_frames'))} frames, "
        f"{values(lambda i: _test_frames(i, 'frames'))} frames of ε-greedy play with ε "
        f"{values(lambda i: i.setting('evaluation', 'epsilon'))}, its score the mean return of "
        "the test's episodes."
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
            format_mean_error(*cell.test),
            _difference_cell(cell.test_versus_uniform),
            variant.code,
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
        "*periodic test*: per seed, the score of its latest periodic test at or before the "
        "frame count; mean ± standard error over the seeds tested by then. The tests play "
        "greedily but for their ε, and with the same sticky actions; their Δ is as below.",
        "",
        "*seeds*: the runs that trained that far, of the variant's runs. A run counts if its "
        "last episode ended at or beyond the frame count, or it logged a periodic test there or "
        "later (a finished run's last episode is cut off at its budget, unlogged).",
        "",
        "*Variants*: the replay kind; `dqn-` in front: MinAtar's DQN target max_a Q_target(s', "
        "a), without it this project's Double DQN target; behind it, a priority signal other "
        "than the paper's |δ| (`-huber_loss`: the Huber loss, as the published MinAtar "
        "prioritized agent) and an eviction other than the oldest first (`-lowest_priority`); "
        "then `key=value` for each setting whose value differs between that variant's runs of "
        "the game (a "
        "sweep's keys, as `replay.priority_exponent=0.4`): only runs that differ in their seed "
        "alone are pooled as seeds.",
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
        "*code*: the commits that ran the variant's runs (see Code below).",
        "",
    ]


def report_frames(variants: Sequence[VariantRuns]) -> list[int]:
    """The frame counts of the tables: CHECKPOINTS and the longest budget of the runs."""
    budget = max(run.info.total_frames for variant in variants for run in variant.runs)
    return sorted({*CHECKPOINTS, budget})


def markdown(
    shown_as: str,
    variants: Sequence[VariantRuns],
    frames: Sequence[int],
    figures: Sequence[str],
    notes: Sequence[str],
) -> str:
    """report.md; `shown_as` names the results reported, `frames` the tables' frame counts."""
    runs = sum(len(variant.runs) for variant in variants)
    games = len({variant.game for variant in variants})
    lines = [
        f"# MinAtar: prioritized against uniform replay: {shown_as}",
        "",
        f"Runs: {runs} in {len(variants)} game × variant groups; games: {games}. "
        + protocol(variants),
        "",
        *explanation(),
        *(line for count in frames for line in checkpoint_section(variants, count)),
        "## Figures",
        "",
        f"Per seed (thin lines) the average return of its last {LAST_EPISODES} episodes at "
        "each episode's end; thick: their mean over the seeds that trained that far, on "
        f"{GRID_POINTS} equal steps of frames, with a ± standard-error band. Star: MinAtar's "
        "published "
        "DQN at 1M frames; dashed line: at 5M frames (beyond these runs). Where a variant's "
        "runs vary one number (a sweep's key), `minatar_<game>_<key>.png`: the last-100 return "
        "at the largest frame count of the tables, mean ± standard error over seeds, against "
        "it; dashed: the uniform variant's mean.",
        "",
    ]
    provenances = (run.info.provenance for variant in variants for run in variant.runs)
    return "\n".join([*lines, report_end(figures, provenances, notes)])


def curve_figures(variants: Sequence[VariantRuns], out: Path) -> list[str]:
    """Per game its variants' curves (`plot_minatar`) into `out`; returns the file names."""
    names = []
    for game in dict.fromkeys(variant.game for variant in variants):  # in report order
        ours = [variant for variant in variants if variant.game == game]
        end = max(run.trained_frames for variant in ours for run in variant.runs)
        names.append(f"minatar_{game}.png")
        bands = [seed_band(variant, end) for variant in ours]
        reference = published_dqn().get(game)
        plot_minatar(game_title(game), bands, reference, REFERENCE_FRAMES, out / names[-1])
    return names


def swept_figures(variants: Sequence[VariantRuns], frames: Sequence[int], out: Path) -> list[str]:
    """Per game and key that a variant's runs vary as a number, the return at the largest of
    `frames` that a run reached against it (`plot_against_key`); returns the file names."""
    reached = [cells for cells in (cells_at(variants, count) for count in frames) if cells]
    if not reached:
        return []
    cells = reached[-1]
    names = []
    for (game, key), lines in swept_lines(cells).items():
        baseline_name = next(iter(lines.values()))[0].variant.baseline
        baseline = [c for c in cells if (c.variant.game, c.variant.name) == (game, baseline_name)]
        names.append(f"minatar_{game}_{key}.png")
        plot_against_key(game_title(game), key, lines, next(iter(baseline), None), out / names[-1])
    return names


def build(
    results_dir: Path,
    out: Path,
    shown_as: str | None = None,
    source: Callable = lambda info: info.path,
    name_others: bool = True,
) -> Path:
    """Writes the figures and report.md into `out`; returns report.md's path. `shown_as` names
    the results in the report (default: `results_dir`), `source(info)` each run in its notes.
    A directory without exported MinAtar runs is a one-line ValueError naming it, before
    anything is written. The notes (also on stderr) name each run left out, and with
    `name_others` how many runs of each other family there are."""
    variants, notes = read_variants(results_dir, source)
    if not variants:
        raise ValueError(
            f"{shown_as or results_dir} holds no exported MinAtar run (config.yaml with env.kind "
            "minatar beside a training_returns.csv); export runs with: "
            "python -m reporting export RUN_DIR --out DIR"
        )
    others = read_results(results_dir, FAMILY)[1] if name_others else {}
    notes += [
        f"{count} {family} run(s) left out (not MinAtar): python -m reporting published"
        for family, count in others.items()
    ]
    for note in notes:  # in report.md too: said here, so that no run is left out unseen
        print(f"note: {note}", file=sys.stderr)
    shown_as = shown_as or f"`{results_dir}`"
    out.mkdir(parents=True, exist_ok=True)
    frames = report_frames(variants)
    figures = [*curve_figures(variants, out), *swept_figures(variants, frames, out)]
    (out / "report.md").write_text(markdown(shown_as, variants, frames, figures, notes))
    return out / "report.md"
