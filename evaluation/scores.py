"""Human-normalized scores: the reference tables of random and human scores, and the PER
paper's own Table 7, from ``evaluation/data/`` (sources in its README.md), by ROM id.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from importlib import resources

from envs.games import resolve_game

_REFERENCE_CSV_NAME = "atari57_reference_scores.csv"
_TABLE7_CSV_NAME = "per_paper_table7_human_starts.csv"
# Table 7 was measured from human starts: its random and human columns are that reference table.
PAPER_REFERENCE = "human_starts"
# Table 7's agent columns, in the paper's order.
PAPER_COLUMNS = ("dqn", "gorila", "dqn_rank", "ddqn", "ddqn_rank", "ddqn_prop")


def data_rows(name: str, package: str = __package__) -> list[dict[str, str]]:
    """The rows of CSV file `name` in `package`'s data/ (its README.md describes it), by column."""
    text = resources.files(package).joinpath("data", name).read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


@functools.cache
def _reference_tables() -> dict[str, dict[str, tuple[float, float]]]:
    """protocol -> ROM id -> (random, human), from the columns ``<protocol>_random|human``."""
    rows = data_rows(_REFERENCE_CSV_NAME)
    protocols = [name.removesuffix("_random") for name in rows[0] if name.endswith("_random")]
    tables: dict[str, dict[str, tuple[float, float]]] = {p: {} for p in protocols}
    for row in rows:
        for protocol, table in tables.items():
            pair = (float(row[f"{protocol}_random"]), float(row[f"{protocol}_human"]))
            table[row["rom_id"]] = pair
    return tables


def reference_scores(game: str, protocol: str) -> tuple[float, float]:
    """(random, human) scores of ``game`` in ``protocol``'s reference table ("noop": Wang et al.
    2016; "human_starts": Nair et al. 2015, van Hasselt et al. 2016)."""
    rom_id = resolve_game(game).rom_id
    tables = _reference_tables()
    if protocol not in tables:
        raise ValueError(
            f"protocol={protocol!r} is not allowed: must be one of {', '.join(tables)}"
        )
    return tables[protocol][rom_id]


def normalized_score(score: float, game: str, protocol: str) -> float:
    """(agent - random) / |human - random| (PER paper, Equation 4); the absolute value matters
    only for Video Pinball, whose random score beats the human's."""
    random_score, human_score = reference_scores(game, protocol)
    return (float(score) - random_score) / abs(human_score - random_score)


@dataclass(frozen=True)
class PaperScores:
    """One game's row of the PER paper's Table 7 (raw human-starts scores; None = no entry)."""

    rom_id: str
    random: float
    human: float
    dqn: float | None
    gorila: float | None
    dqn_rank: float | None
    ddqn: float | None
    ddqn_rank: float | None
    ddqn_prop: float | None


@functools.cache
def _paper_table() -> dict[str, PaperScores]:
    table = {}
    for row in data_rows(_TABLE7_CSV_NAME):
        agents = {column: float(row[column]) if row[column] else None for column in PAPER_COLUMNS}
        table[row["rom_id"]] = PaperScores(
            row["rom_id"], float(row["random"]), float(row["human"]), **agents
        )
    return table


def paper_scores(game: str) -> PaperScores:
    """The PER paper's Table 7 row for ``game``."""
    return _paper_table()[resolve_game(game).rom_id]
