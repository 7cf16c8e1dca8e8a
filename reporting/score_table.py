"""The score table `evaluate.py` prints and writes (JSON and CSV), from one `RunScore` per
evaluated run: per-game scores beside the paper's, and across-game summaries.

Per (variant, game) the score is the mean over runs of each run's mean episode score; its spread
the episode standard deviation for one run, the standard deviation of the runs' means for
several. Per variant across games: median and mean human-normalized score, the games above
human and, when every game has the same number (>= 2) of runs, the interquartile mean with
stratified-bootstrap 95 % intervals (rliable: ``pip install '.[iqm]'``). Without human reference
scores (see :func:`normalizes`) the table holds the raw scores only.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from artifacts.atomic import write_files_atomically
from envs.games import resolve_game
from envs.registry import DEFAULT_KIND, environment_kind
from evaluation.protocol_registry import Protocol
from evaluation.scores import PAPER_REFERENCE, normalized_score, paper_scores

PAPER = (("ddqn", "uniform"), ("ddqn_rank", "rank-based"), ("ddqn_prop", "proportional"))
GAME_COLUMNS = (
    "game",
    "rom_id",
    "variant",
    "runs",
    "episodes",
    "score_mean",
    "score_std",
    "normalized",
    *(f"paper_{column}" for column, _ in PAPER),
    *(f"paper_{column}_normalized" for column, _ in PAPER),
)
RAW_GAME_COLUMNS = ("game", "game_id", "variant", "runs", "episodes", "score_mean", "score_std")


@dataclass(frozen=True)
class RunScore:
    """One run's evaluation (a row of the JSON's ``runs``)."""

    run: str
    game: str  # the game's id in its env kind (envs.registry: an Atari ROM id, a MinAtar name)
    variant: str
    seed: int | None
    step: int
    frames: int
    episodes: int
    mean: float
    std: float
    normalized: float | None  # None: a raw-score protocol or a game without human reference
    partial: bool
    episode_scores: tuple[float, ...] = ()
    start_frames: tuple[int, ...] = ()  # no-op count or human prefix of each episode
    env_kind: str = DEFAULT_KIND
    epsilon: float | None = None  # of the ε-greedy policy that played the episodes


def normalizes(protocol: Protocol, runs: list[RunScore]) -> bool:
    """Whether the table has human-normalized scores and the paper's (Atari) columns: the
    protocol names a reference table and every run's env kind has human reference scores."""
    return protocol.reference is not None and all(
        environment_kind(run.env_kind).has_human_reference for run in runs
    )


def game_name(game: str, env_kind: str) -> str:
    """A game's name for the table: the display name (``Pong``) for the Atari-57 games, which
    envs.games names and the reference tables cover; the env kind's own id otherwise."""
    environment = environment_kind(env_kind)
    if environment.has_human_reference:
        return resolve_game(game).name
    return environment.game_id(game)


def game_rows(runs: list[RunScore], protocol: Protocol) -> list[dict]:
    """One row per (variant, game), in game-name order; see the module docstring. Rows of a
    raw table (not :func:`normalizes`) have the keys ``RAW_GAME_COLUMNS``, else
    ``GAME_COLUMNS``."""
    normalized = normalizes(protocol, runs)
    # Only Atari's ids are ROM ids; the normalized table keeps the column name it always had.
    id_column = "rom_id" if normalized else "game_id"
    groups: dict[tuple[str, str, str], list[RunScore]] = defaultdict(list)
    for run in runs:
        groups[(run.variant, run.game, run.env_kind)].append(run)
    rows = []
    for (variant, game, env_kind), members in sorted(
        groups.items(), key=lambda g: (g[0][1], g[0][2], g[0][0])
    ):
        means = np.array([m.mean for m in members])
        spread = members[0].std if len(members) == 1 else float(np.std(means))
        row = {
            "game": game_name(game, env_kind),
            id_column: game,
            "variant": variant,
            "runs": len(members),
            "episodes": sum(m.episodes for m in members),
            "score_mean": float(means.mean()),
            "score_std": spread,
        }
        if not normalized:
            rows.append(row)
            continue
        row["normalized"] = normalized_score(means.mean(), game, protocol.reference)
        paper = paper_scores(game)
        for column, _ in PAPER:
            raw = getattr(paper, column)
            row[f"paper_{column}"] = raw
            row[f"paper_{column}_normalized"] = (
                None if raw is None else normalized_score(raw, game, PAPER_REFERENCE)
            )
        rows.append(row)
    return rows


def summaries(
    runs: list[RunScore], rows: list[dict], protocol: Protocol, *, reps: int, seed: int
) -> list[dict]:
    """Across-game numbers per variant (module docstring); none for a raw table, whose games'
    scores have no common scale to aggregate on."""
    if not normalizes(protocol, runs):
        return []
    result = []
    for variant in sorted({row["variant"] for row in rows}):
        normalized = np.array([r["normalized"] for r in rows if r["variant"] == variant])
        summary = {
            "variant": variant,
            "games": len(normalized),
            "median_normalized": float(np.median(normalized)),
            "mean_normalized": float(np.mean(normalized)),
            "games_above_human": int((normalized > 1.0).sum()),
            "iqm": None,
            "iqm_ci_low": None,
            "iqm_ci_high": None,
            "iqm_note": "",
        }
        summary.update(_iqm([r for r in runs if r.variant == variant], reps=reps, seed=seed))
        result.append(summary)
    return result


def _iqm(runs: list[RunScore], *, reps: int, seed: int) -> dict:
    per_game: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        per_game[run.game].append(run.normalized)
    counts = {len(scores) for scores in per_game.values()}
    if len(counts) != 1 or counts.pop() < 2:
        return {"iqm_note": "needs the same number (>= 2) of seeds for every game"}
    matrix = np.array([per_game[game] for game in sorted(per_game)]).T  # (runs, games)
    try:
        point, low, high = _rliable_iqm(matrix, reps=reps, seed=seed)
    except ImportError:
        return {"iqm_note": "install rliable for the IQM: pip install '.[iqm]' in the checkout"}
    except Exception as error:  # rliable breaks with arch >= 8 and pandas >= 3
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return {"iqm_note": f"rliable failed ({first}); it needs arch<8 and pandas<3"}
    return {
        "iqm": point,
        "iqm_ci_low": low,
        "iqm_ci_high": high,
        "iqm_note": f"stratified bootstrap over runs, {reps} resamples, 95% CI",
    }


def _rliable_iqm(matrix: np.ndarray, *, reps: int, seed: int) -> tuple[float, float, float]:
    """rliable's IQM of a (runs, games) matrix and its percentile bootstrap 95 % interval."""
    import warnings

    from rliable import library, metrics

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arch 7 deprecates random_state
        points, intervals = library.get_interval_estimates(
            {"run": matrix},
            lambda scores: np.array([metrics.aggregate_iqm(scores)]),
            reps=reps,
            random_state=np.random.RandomState(seed),
        )
    low, high = intervals["run"][:, 0]
    return float(points["run"][0]), float(low), float(high)


def report_files(directory: Path, protocol: str) -> tuple[Path, Path]:
    """The JSON and CSV files of `protocol`'s report in ``directory``."""
    return directory / f"evaluation_{protocol}.json", directory / f"evaluation_{protocol}.csv"


def write_report(
    directory: Path, protocol: Protocol, header: dict, runs, rows, summary
) -> list[Path]:
    """``evaluation_<protocol>.json`` (everything) and ``.csv`` (one row per variant and game,
    the columns of the rows' table: ``header["normalized"]``), both or neither: a write that
    fails (a full disk) leaves the files as they were (`write_files_atomically`)."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = report_files(directory, protocol.name)
    document = {**header, "runs": [asdict(r) for r in runs], "games": rows, "summary": summary}
    table = io.StringIO()
    columns = GAME_COLUMNS if header["normalized"] else RAW_GAME_COLUMNS
    writer = csv.DictWriter(table, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    write_files_atomically({json_path: text.encode(), csv_path: table.getvalue().encode()})
    return [json_path, csv_path]


def cap_text(caps: list[int]) -> str:
    """'episodes capped at 108,000 frames'; a cap of 0 is none (MinAtar's published setting)."""
    capped = "/".join(f"{cap:,}" for cap in caps if cap)
    if not capped:
        return "episodes not capped"
    return f"episodes capped at {capped} frames" + (" or not capped" if 0 in caps else "")


def table_title(
    protocol: Protocol,
    noop_max: list[int],
    epsilons: list[float],
    caps: list[int],
    episodes: int | None,
) -> str:
    """The table's first line: the protocol's title with the runs' resets, ε, budget
    (``episodes=``, None for the protocol's) and episode caps, values that differ between runs
    joined by /."""
    resets = [f"1-{most} random no-ops" if most else "no no-ops" for most in noop_max]
    title = protocol.title.format(
        noop_max="/".join(map(str, noop_max)),
        reset="/".join(resets),
        epsilon="/".join(map(str, epsilons)),
        episodes=protocol.budget_text(episodes),
    )
    return f"{title}; {cap_text(caps)}"


def paper_note(protocol: Protocol) -> str:
    """What the paper columns are, and whether they were measured like these scores."""
    note = (
        "paper: Schaul et al. 2016, Table 7 raw scores of tuned Double DQN from human "
        "starts (Table 6 normalized %)"
    )
    if protocol.reference != PAPER_REFERENCE:  # normalized against another protocol's table
        note += "; measured from human starts, so not the same protocol as these scores"
    return note


def format_table(header: dict, rows: list[dict], summary: list[dict]) -> str:
    """The printed report: one line per game and variant with the paper's Table 7 Double DQN
    scores (and their Table 6 percentages) beside it, then one summary line per variant; for a
    raw table (``header["normalized"]`` false) the raw scores alone."""
    lines = [header["title"], ""]
    width = max([12, *(len(row["variant"]) for row in rows)]) + 1  # a variant's name whole
    heads = f"{'game':<18}{'variant':<{width}}{'runs':>4}{'episodes':>9}{'score mean ± std':>24}"
    if not header["normalized"]:
        lines.append(heads)
        lines.extend(_raw_cells(row, width) for row in rows)
        return "\n".join(lines)
    paper_heads = "".join(f"{'paper ' + name:>22}" for _, name in PAPER)
    lines.append(f"{heads}{'normalized':>11}{paper_heads}")
    for row in rows:
        paper = "".join(_paper_cell(row, column) for column, _ in PAPER)
        lines.append(f"{_raw_cells(row, width)}{_percent(row['normalized']):>11}{paper}")
    lines.append("")
    for s in summary:
        iqm = (
            "n/a"
            if s["iqm"] is None
            else (
                f"{_percent(s['iqm'])} [{_percent(s['iqm_ci_low'])}, {_percent(s['iqm_ci_high'])}]"
            )
        )
        note = f" ({s['iqm_note']})" if s["iqm_note"] else ""
        lines.append(
            f"{s['variant']}: {s['games']} game(s), median {_percent(s['median_normalized'])}"
            f", mean {_percent(s['mean_normalized'])}, above human "
            f"{s['games_above_human']}, IQM {iqm}{note}"
        )
    lines.append(header["paper_note"])
    return "\n".join(lines)


def _raw_cells(row: dict, width: int) -> str:
    """Game, variant (in `width` characters), runs, episodes and mean ± std: the columns every
    table has."""
    score = f"{row['score_mean']:.1f} ± {row['score_std']:.1f}"
    return (
        f"{row['game'][:17]:<18}{row['variant']:<{width}}{row['runs']:>4}"
        f"{row['episodes']:>9}{score:>24}"
    )


def _paper_cell(row: dict, column: str) -> str:
    raw = row[f"paper_{column}"]
    if raw is None:
        return f"{'-':>22}"
    percent = _percent(row[f"paper_{column}_normalized"])
    return f"{f'{raw:.1f} ({percent})':>22}"


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"
