"""MinAtar: prioritized against uniform replay in training return, beside MinAtar's published DQN.

    python -m reporting minatar results --out results/minatar_report

Reads the exported MinAtar runs below RESULTS_DIR and writes into OUT one minatar_<game>.png
per game (each setting's last-100-episode training return against frames, mean ± standard error
over seeds, each seed thin, MinAtar's published DQN marked) and report.md: per game and setting
at 0.5M and 1M frames and the runs' budget, the training return and the periodic test's score
over seeds, each prioritized variant's difference to uniform with a 95 % Welch interval, and
the commits that made its runs. A run counts where it trained, marked if unfinished. A
variant's runs that differ in more than their seed (a sweep over α) are a row per setting; where
they vary one number, minatar_<game>_<key>.png shows the return against it. The sweep report
(`python -m reporting DIR`) writes this report for a sweep's MinAtar runs.
"""

import functools
import math
from collections.abc import Sequence
from pathlib import Path

from envs.minatar import GAMES
from reporting import minatar_seeds, report
from reporting.minatar_seeds import LAST_EPISODES, REFERENCE_FRAMES, Cell, baseline, cells_at
from reporting.report import Group, format_interval, format_mean_error
from reporting.results import TRAINING_RETURNS, ExportedRun, count_name, read_runs

FAMILY = "minatar"
TARGET_ORDER = ("dqn", "double_dqn")  # MinAtar's published target first
CHECKPOINTS = (500_000, 1_000_000)  # and the runs' budget
COLUMNS = (
    "game | variant | seeds | last 100 | running average | published DQN at 1M | "
    "Δ last 100 vs uniform [95 % CI] | Δ running average vs uniform [95 % CI] | periodic test | "
    "Δ periodic test vs uniform [95 % CI] | code"
)
RATE = minatar_seeds.RUNNING_AVERAGE_RATE
EXPLANATION = [
    f"*last 100*: per seed, the average return of its last {LAST_EPISODES} episodes that "
    "ended at or before the frame count (all of them while fewer had ended). *running "
    f"average*: MinAtar's own (examples/dqn.py), avg ← {1 - RATE:g}·avg + {RATE:g}·G over "
    "every episode up to then, from avg = 0: it lags by about 100 episodes. Both are mean ± "
    "standard error over seeds (sample standard deviation / √n; – with one seed).",
    "",
    "*periodic test*: per seed, the score of its latest periodic test at or before the "
    "frame count; mean ± standard error over the seeds tested by then. The tests play "
    "greedily but for their ε, and with the same sticky actions; their Δ is as below.",
    "",
    "*seeds*: the runs that trained that far, of the variant's runs, and how many of them "
    "had not finished (see Unfinished runs). A run trained as far as its export records "
    "(an export from before that record: its last episode or periodic test, a finished "
    "run's last episode being cut off at its budget, unlogged).",
    "",
    "*Variants*: the replay kind; `dqn-` in front: MinAtar's DQN target max_a Q_target(s', "
    "a), without it this project's Double DQN target; behind it, a priority signal other "
    "than the paper's |δ| (`-huber_loss`: the Huber loss, as the published MinAtar "
    "prioritized agent) and an eviction other than the oldest first (`-lowest_priority`); "
    "then `key=value` for each setting whose value differs between that variant's runs of "
    "the game (a sweep's keys, as `replay.priority_exponent=0.4`): only runs that differ "
    "in their seed alone are pooled as seeds.",
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


def game_title(game: str) -> str:
    return game.replace("_", " ").title()


def protocol(groups: Sequence[Group]) -> str:
    """The settings a reader needs to hold the numbers next to published ones, as the runs'
    configs give them (values that differ between runs joined by /, ? where a config has
    none)."""
    infos = [run.info for group in groups for run in group.runs]

    def values(value) -> str:
        return " / ".join(sorted({str(value(info)) for info in infos}))

    def frames(count) -> str:
        return "?" if count is None else count_name(count)

    def epsilon_end(info) -> str:  # learning start + decay
        steps = [
            info.setting("train", f"{key}_steps") for key in ("learning_start", "epsilon_decay")
        ]
        return frames(None if None in steps else sum(steps) * info.frame_skip)

    return (
        "The measure is the **training return**: the return of the episodes played while "
        f"learning, ε-greedy with ε {values(lambda i: i.setting('train', 'epsilon_final'))} "
        f"after {values(epsilon_end)} frames; sticky actions "
        f"{values(lambda i: i.setting('env', 'repeat_action_probability'))}; "
        f"{values(lambda i: count_name(i.total_frames))} frames per run, one agent step per "
        "frame. That is what MinAtar's published learning curves show. Beside it, the runs' "
        f"periodic test: every {values(lambda i: frames(i.setting('evaluation', 'every_frames')))} "
        f"frames, {values(lambda i: frames(i.setting('evaluation', 'frames')))} frames of "
        f"ε-greedy play with ε {values(lambda i: i.setting('evaluation', 'epsilon'))}, its score "
        "the mean return of the test's episodes."
    )


def cell_row(cell: Cell) -> str:
    group, reference = cell.variant, minatar_seeds.published_dqn().get(cell.variant.game)
    published = "–"
    if reference is not None and REFERENCE_FRAMES[0] in reference.returns:
        mark = "" if reference.comparable else " †"
        published = report.format_score(reference.returns[REFERENCE_FRAMES[0]]) + mark
    versus = (cell.last_versus_uniform, cell.running_versus_uniform, cell.test_versus_uniform)
    last, running, test = ("–" if v is None else format_interval(*v) for v in versus)
    seeds = f"{cell.seeds} of {len(group.runs)}{report.unfinished_mark(cell.reached)}"
    means = [format_mean_error(*cell.last), format_mean_error(*cell.running)]
    cells = [game_title(group.game), group.name, seeds, *means, published, last, running]
    cells += [format_mean_error(*cell.test), test, group.code]
    return report.markdown_row(cells)


def checkpoint_section(groups: Sequence[Group], frames: int) -> list[str]:
    """The table at `frames`, and a sentence per difference whose interval excludes zero."""
    cells = cells_at(groups, frames)
    title = f"## At {count_name(frames)} frames"
    if not cells:
        furthest = max(run.trained_frames for group in groups for run in group.runs)
        return [
            title,
            "",
            f"No run has trained that far yet (the furthest: {furthest:,} frames).",
            "",
        ]
    found = []
    for cell in cells:
        last = (f"last-{LAST_EPISODES} average", cell.last_versus_uniform)
        for measure, versus in (last, ("running average", cell.running_versus_uniform)):
            if versus is None or not (versus[2] < 0 or versus[1] > 0):
                continue  # NaN bounds compare False: no interval, no verdict
            side, verdict = ("below", "worse") if versus[2] < 0 else ("above", "better")
            found.append(
                f"- {game_title(cell.variant.game)}, {cell.variant.name}: the {measure} "
                f"difference {format_interval(*versus)} lies entirely {side} zero: {verdict} "
                f"than {baseline(cell.variant)}."
            )
    differences = [cell.last_versus_uniform for cell in cells if cell.last_versus_uniform]
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
    return [title, "", *report.table(COLUMNS, map(cell_row, cells)), "", *found, ""]


def read_variants(runs: Sequence[ExportedRun]) -> tuple[list[Group], list[str]]:
    """(MinAtar `runs` by setting: games in MinAtar's order, per game the published target
    first, uniform first, a variant's settings by their values; notes on the runs left out)."""
    kept, notes = report.with_scores(runs, "returns", TRAINING_RETURNS, "training episode")
    groups, repeats = report.by_setting(kept)

    def place(group: Group) -> tuple:
        target = group.runs[0].info.target_rule
        game = GAMES.index(group.game) if group.game in GAMES else len(GAMES)
        rule = TARGET_ORDER.index(target) if target in TARGET_ORDER else len(TARGET_ORDER)
        return (game, group.game, rule, target, *group.order[1:])

    return sorted(groups, key=place), notes + repeats


def figures(groups: Sequence[Group], frames: Sequence[int]) -> dict:
    """File name -> what draws it: per game its groups' curves (`plot_minatar`), and per game
    and key that a variant's runs vary as a number the return at the largest of `frames` that a
    run reached against it (`plot_against_key`)."""
    drawn = {}
    for game in dict.fromkeys(group.game for group in groups):  # in report order
        ours = [group for group in groups if group.game == game]
        end = max(run.trained_frames for group in ours for run in group.runs)
        plot = functools.partial(minatar_seeds.plot_minatar, game_title(game), ours, end)
        drawn[f"minatar_{game}.png"] = plot
    reached = [cells for cells in (cells_at(groups, count) for count in frames) if cells]
    for (game, key), lines in minatar_seeds.swept_lines(reached[-1] if reached else []).items():
        uniform = baseline(next(iter(lines.values()))[0].variant)
        line = next(
            (c for c in reached[-1] if (c.variant.game, c.variant.name) == (game, uniform)), None
        )
        plot = functools.partial(minatar_seeds.plot_against_key, game_title(game), key, lines, line)
        drawn[f"minatar_{game}_{key}.png"] = plot
    return drawn


def prepare(runs: Sequence[ExportedRun], notes: Sequence[str], name: str, shown_as: str = ""):
    """(report.md's text, its figures: file name -> what draws it, the notes on what was left
    out: those of `read_variants`, then the caller's `notes`) over MinAtar `runs`; `name`
    names them in a one-line ValueError where none has a training episode, and `shown_as` (by
    default `name` in backquotes) in the report."""
    groups, left_out = read_variants(runs)
    if not groups:
        raise ValueError(
            f"{name} holds no exported MinAtar run (config.yaml with env.kind minatar beside a "
            "training_returns.csv); export runs with: python -m reporting export RUN_DIR --out DIR"
        )
    notes = [*left_out, *notes]
    budget = max(run.info.total_frames for group in groups for run in group.runs)
    frames = sorted({*CHECKPOINTS, budget})
    drawn = figures(groups, frames)
    legend = (
        f"Per seed (thin lines) the average return of its last {LAST_EPISODES} episodes at "
        "each episode's end; thick: their mean over the seeds that trained that far, on "
        f"{minatar_seeds.GRID_POINTS} equal steps of frames, with a ± standard-error band. "
        "Star: MinAtar's published DQN at 1M frames; dashed line: at 5M frames (beyond these "
        "runs). Where a variant's runs vary one number (a sweep's key), "
        "`minatar_<game>_<key>.png`: the last-100 return at the largest frame count of the "
        "tables, mean ± standard error over seeds, against it; dashed: the uniform variant's "
        "mean."
    )
    body = [*EXPLANATION, *(line for count in frames for line in checkpoint_section(groups, count))]
    title = f"MinAtar: prioritized against uniform replay: {shown_as or f'`{name}`'}"
    intro = ". " + protocol(groups)
    return report.document(title, intro, groups, body, drawn, notes, legend), drawn, notes


def build(results_dir: Path, out: Path) -> Path:
    """Writes the report on the MinAtar runs exported below `results_dir` into `out`; returns
    report.md's path."""
    runs, notes = read_runs(results_dir, FAMILY)
    return report.write_report(out, *prepare(runs, notes, str(results_dir)))
