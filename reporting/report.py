"""The one report builder: what every report kind (published, MinAtar, sweep) shares, so that
each gives only its sections and figures. Runs are grouped by setting (`Group`), so that only
runs that differ in their seed alone are pooled; an unfinished run is marked wherever it is
counted and listed with how far it trained; files are written whole, after all is computed."""

import io
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from artifacts.atomic import write_atomically
from artifacts.provenance import code_of
from reporting.results import ExportedRun, kind_key

POOLED_KEYS = ("seed", "env.game")  # their runs are pooled (seeds) or reported apart (games)
BUDGET_KEY = "train.total_steps"
INERT_KEY = "replay.importance_exponent_final_step"  # no difference where `settings_of` drops it


def settings_of(config: dict, prefix: str = "") -> dict[str, object]:
    """A config's settings by dotted key, as runs are told apart: β's end step is the one the
    run used, and where β is constant (uniform replay, a β held) it changes nothing, and is
    left out."""
    flat = {}
    for key, value in config.items():
        nested = isinstance(value, dict)
        flat.update(settings_of(value, f"{prefix}{key}.") if nested else {prefix + key: value})
    if flat.get("replay.importance_exponent") == flat.get("replay.importance_exponent_final"):
        flat.pop(INERT_KEY, None)
    elif INERT_KEY in flat:  # null: the run's last step, as `training.loop` reads it
        flat[INERT_KEY] = flat[INERT_KEY] or flat.get(BUDGET_KEY)
    return flat


def setting_text(settings: dict[str, object], key: str) -> str:
    """`key`'s value as a name shows it: YAML's words for null and booleans, a number by its
    value (1 and 1.0 alike), `unset` where the config has no such key."""
    value = settings.get(key, "unset")
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 1e15 else repr(number)
    return str(value)


def varied_keys(infos) -> dict[tuple[str, str, int], tuple[str, ...]]:
    """(game, variant, budget) -> the keys but POOLED_KEYS whose values differ between those
    runs, and BUDGET_KEY where the variant's runs of the game have several budgets. A key that
    differs only between budgets (a preset's test period) is named by the budget, one that
    differs only between games (a device) by nothing."""
    configs: dict[tuple[str, str, int], list[dict[str, object]]] = {}
    for info in infos:
        place = (info.game, info.variant, info.total_steps)
        configs.setdefault(place, []).append(settings_of(info.config))
    varied = {}
    for place, flats in configs.items():
        found = {BUDGET_KEY} if sum(other[:2] == place[:2] for other in configs) > 1 else set()
        for key in set().union(*flats) - set(POOLED_KEYS):
            texts = {setting_text(flat, key) for flat in flats if key in flat or key != INERT_KEY}
            found |= {key} if len(texts) > 1 else set()
        varied[place] = tuple(sorted(found))
    return varied


def as_number(text: str) -> float | None:
    """A setting's text as a number; None where it is none."""
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Group:
    """The runs of one setting, by seed: they differ in their seed alone. `values`: (key, its
    `setting_text`) for each key `varied_keys` gives their place."""

    game: str
    variant: str
    values: tuple[tuple[str, str], ...]
    runs: tuple[ExportedRun, ...]

    @property
    def name(self) -> str:
        """The variant, then each `key=value`: `dqn-proportional replay.priority_exponent=0.4`."""
        return self.named()

    def named(self, shown_apart: Sequence[str] = ()) -> str:
        """`name`, but for the keys in `shown_apart` (a report's column shows them)."""
        values = (f"{key}={value}" for key, value in self.values if key not in shown_apart)
        return " ".join([self.variant, *values])

    @property
    def kind(self) -> str:
        return self.runs[0].info.kind

    @property
    def code(self) -> str:
        """The commits that made its runs (`artifacts.provenance.code_of`)."""
        return code_of(run.info.provenance for run in self.runs)

    @property
    def order(self) -> tuple:
        """By game, replay kind in the paper's order, variant, then values (numbers by value)."""
        values = [(value, as_number(value)) for _, value in self.values]
        ordered = tuple((1, 0.0, v) if n is None else (0, n, "") for v, n in values)
        return (self.game, kind_key(self.kind), self.variant, ordered)


def by_setting(runs: Sequence[ExportedRun]) -> tuple[list[Group], list[str]]:
    """(a `Group` per setting, its runs by seed, a finished run before an unfinished one; a note
    on each run left out as a repeat of a run kept: its setting and seed)."""
    varied = varied_keys([run.info for run in runs])
    groups: dict[tuple, list[ExportedRun]] = {}
    notes = []
    for run in sorted(runs, key=lambda run: (run.info.seed, not run.finished, str(run.info.path))):
        info, settings = run.info, settings_of(run.info.config)
        keys = varied[info.game, info.variant, info.total_steps]
        place = (info.game, info.variant, tuple((k, setting_text(settings, k)) for k in keys))
        members = groups.setdefault(place, [])
        twin = next((member for member in members if member.info.seed == info.seed), None)
        if twin is None:
            members.append(run)
        else:
            same = f"the same settings and seed as {twin.info.path}"
            notes.append(f"{info.path}: {same}, left out (only seeds are pooled)")
    return [Group(*place, tuple(members)) for place, members in groups.items()], notes


def with_scores(runs, scores: str, file: str, what: str) -> tuple[list[ExportedRun], list[str]]:
    """(the `runs` with a row of `scores` (`tests`, `returns`), a note on each other one)."""
    kept = [run for run in runs if getattr(run, scores) is not None and getattr(run, scores).size]
    missing = {run: getattr(run, scores) is None for run in runs if run not in kept}
    reason = {True: f"no {file} (not an exported run)", False: f"no {what}"}
    return kept, [f"{run.info.path}: {reason[none]}, left out" for run, none in missing.items()]


def format_score(value: float | None) -> str:
    """Every number of every report's tables; an absent one (None or NaN) as –."""
    return "–" if value is None or np.isnan(value) else f"{value:.1f}"


def format_percent(value: float | None) -> str:
    return "–" if value is None or np.isnan(value) else f"{100 * value:.1f} %"


def format_interval(value: float, low: float, high: float) -> str:
    return f"{format_score(value)} [{format_score(low)}, {format_score(high)}]"


def format_mean_error(mean: float, error: float) -> str:
    return f"{format_score(mean)} ± {format_score(error)}"


def markdown_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(header: str, rows: Iterable[str]) -> list[str]:
    """A markdown table's lines: its `header` (column names between ` | `), then `rows`."""
    return [f"| {header} |", "|" + "---|" * (header.count(" | ") + 1), *rows]


def unfinished_mark(runs: Iterable[ExportedRun]) -> str:
    """` (2 unfinished)` where some of `runs` had not finished, else nothing."""
    count = sum(not run.finished for run in runs)
    return f" ({count} unfinished)" if count else ""


def document(title, intro, groups, body, figures, notes, legend: str = "") -> str:
    """A report.md: `title`, how many runs in how many groups and games, `intro`, `body` (each
    section ending with an empty line), the `figures` after their `legend`, each distinct code
    and set of libraries that made the runs (their provenance), the unfinished runs with how far
    they trained, and the `notes`."""
    runs = [run for group in groups for run in group.runs]
    games = len({group.game for group in groups})
    count = f"Runs: {len(runs)}{unfinished_mark(runs)} in {len(groups)} game × variant groups"
    lines = [f"# {title}", "", f"{count}; games: {games}{intro}", "", *body, "## Figures", ""]
    lines += [legend, ""] if legend else []
    codes = Counter((run.info.provenance.code, run.info.provenance.libraries) for run in runs)
    lines += [
        *(f"![{name}]({name})" for name in figures),
        "",
        "## Code",
        "",
        "What made the runs (each run's provenance.yaml): the project's commit at each start "
        "of the run, `-dirty` where tracked files differed from it, and the libraries' "
        "versions; `unknown` for a run, or the part of one, made before runs recorded this.",
        "",
        *table(
            "code | libraries | runs", (markdown_row([*key, str(n)]) for key, n in codes.items())
        ),
    ]
    unfinished = [
        f"- {run.info.path}: trained {run.trained_frames:,} of {run.info.total_frames:,} frames "
        f"({run.steps:,} of {run.info.total_steps:,} steps)"
        for run in runs
        if not run.finished
    ]
    if unfinished:
        lines += [
            "",
            "## Unfinished runs",
            "",
            "These runs had not finished (written their final snapshot) when they were "
            "exported. Each curve ends where its run stopped, and a table counts a run only at "
            "frame counts it reached, marked *unfinished*.",
            "",
            *unfinished,
        ]
    lines += ["", "## Left out", "", *(f"- {note}" for note in notes)] if notes else []
    return "\n".join(lines) + "\n"


# The paper's colours: black uniform, red rank-based, blue proportional.
COLOURS = {"uniform": "black", "rank_based": "red", "proportional": "blue"}
LABELS = {"uniform": "uniform (Double DQN)", "rank_based": "rank-based"}
DOPAMINE_COLOURS = {"DQN": "darkorange", "Rainbow": "purple"}  # DQN's: any published DQN's
# For a second variant of one replay kind in a figure (another target rule or priority signal).
OTHER_COLOURS = ("tab:green", "tab:cyan", "tab:brown", "tab:pink", "tab:olive", "tab:gray", "gold")
OTHER_COLOURS += ("navy", "lime", "maroon", "teal", "magenta")


def label(name: str) -> str:
    """A variant's name in a legend: the replay kind's label for the paper's settings."""
    return LABELS.get(name, name)


def variant_colours(variants: Sequence[tuple[str, str]]) -> dict[str, str]:
    """(name, replay kind) in the order they claim colours -> colour. A kind's paper's colour
    goes to its first name at the paper's settings (the kind, then any `key=value`:
    `Group.name`), else to its first name; every other one gets the next of OTHER_COLOURS:
    no two share one (up to their number)."""
    colours, spare = {}, iter(OTHER_COLOURS)
    for name, kind in sorted(variants, key=lambda variant: variant[0].split()[0] != variant[1]):
        taken = COLOURS.get(kind) in colours.values() or kind not in COLOURS
        colours[name] = next(spare, "grey") if taken else COLOURS[kind]
    return colours


def axes(width: float, height: float, **grid) -> tuple[Figure, object]:
    """A figure and its axes (`grid`: subplots' arguments): matplotlib's `Figure`, no pyplot's
    global state or display backend."""
    figure = Figure(figsize=(width, height), dpi=100)
    return figure, figure.subplots(**grid)


def finish(panel, title: str, xlabel: str, ylabel: str | None, size: float = 7, **legend) -> None:
    """Title, axis labels, a light grid and the legend (`size`-point type) of one panel."""
    panel.set(title=title, xlabel=xlabel, ylabel=ylabel or panel.get_ylabel())
    panel.grid(True, alpha=0.3)
    panel.legend(fontsize=size, **legend)


def save(figure: Figure, path: Path) -> None:
    """The figure as a PNG file, written whole or not at all."""
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png")
    write_atomically(path, image.getbuffer())


def write_report(out: Path, text: str, figures: Mapping[str, Callable], notes) -> Path:
    """Draws `figures` (file name -> what draws it there) and writes `text` as report.md into
    `out`; returns report.md's path. The notes go to stderr too: nothing is left out unseen."""
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in figures.items():
        draw(out / name)
    write_atomically(out / "report.md", text.encode("utf-8"))
    return out / "report.md"
