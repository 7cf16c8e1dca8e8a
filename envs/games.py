"""The Atari-57 games: ids, display names and the reference scores used for normalization.

The table lives in ``envs/data/atari57_reference_scores.csv`` (sources in ``envs/data/README.md``).
"""

from __future__ import annotations

import csv
import difflib
import functools
import re
from dataclasses import dataclass
from importlib import resources

_CSV_NAME = "atari57_reference_scores.csv"
_ACCEPTED = (
    "Accepted: ale-py ROM ids (e.g. breakout), display names (Breakout) "
    "or gymnasium ids (ALE/Breakout-v5)."
)
# ALE/Breakout-v5, Breakout-v5, BreakoutNoFrameskip-v4, BreakoutDeterministic-v4
_GYM_ID = re.compile(
    r"^\s*(?:ale/)?(?P<name>[a-z0-9]+?)(?:noframeskip|deterministic)?-v\d+\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Game:
    """One Atari game and its reference scores.

    ``human_starts_*`` belong to the human-starts protocol (the PER paper's Table 7),
    ``noop_*`` to the no-op starts protocol; never mix the two when normalizing.
    """

    name: str  # display name, e.g. "Breakout", "Up'n Down"
    rom_id: str  # ale-py ROM id, e.g. "up_n_down"
    gym_id: str  # gymnasium id, e.g. "ALE/UpNDown-v5"
    human_starts_random: float
    human_starts_human: float
    noop_random: float
    noop_human: float
    aliases: tuple[str, ...] = ()  # other display spellings, e.g. ("Up and Down",)


def _key(text: str) -> str:
    """Case, spaces and punctuation are not significant in game names."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _parse_display(column: str) -> tuple[str, tuple[str, ...]]:
    """Split the csv's game column: a ``(…)`` part is an alias, a trailing ``*`` is dropped.

    "Up'n Down (Up and Down)" -> ("Up'n Down", ("Up and Down",)); "Berzerk*" -> ("Berzerk", ()).
    """
    match = re.fullmatch(r"(?P<name>.*?)\s*(?:\((?P<alias>[^)]*)\))?\s*", column)
    name = match["name"].rstrip("*").strip()
    alias = (match["alias"] or "").strip()
    return name, ((alias,) if alias else ())


def _read_table() -> tuple[Game, ...]:
    text = resources.files(__package__).joinpath("data", _CSV_NAME).read_text("utf-8")
    games = []
    for row in csv.DictReader(text.splitlines()):
        name, aliases = _parse_display(row["game"])
        games.append(
            Game(
                name=name,
                rom_id=row["rom_id"],
                gym_id=row["gym_id"],
                human_starts_random=float(row["human_starts_random"]),
                human_starts_human=float(row["human_starts_human"]),
                noop_random=float(row["noop_random"]),
                noop_human=float(row["noop_human"]),
                aliases=aliases,
            )
        )
    return tuple(games)


@functools.cache
def all_games() -> tuple[Game, ...]:
    """The 57 games in the csv's order."""
    return _read_table()


@functools.cache
def _lookup() -> dict[str, Game]:
    """Normalized key -> game; a key claimed by two games is a table error, not a guess."""
    table: dict[str, Game] = {}
    for game in all_games():
        # The csv's column as written, e.g. "Up'n Down (Up and Down)".
        verbatim = game.name + "".join(game.aliases)
        spellings = (game.rom_id, game.name, *game.aliases, verbatim, _gym_name(game.gym_id))
        for key in {_key(s) for s in spellings}:
            if table.setdefault(key, game) is not game:
                raise RuntimeError(f"game name {key!r} is ambiguous in {_CSV_NAME}")
    return table


def _gym_name(gym_id: str) -> str:
    match = _GYM_ID.match(gym_id)
    return match["name"] if match else gym_id


def resolve_game(name: str) -> Game:
    """Find a game by ROM id, display name or gymnasium id.

    Matching ignores case, spaces and punctuation: ``breakout``, ``Breakout``,
    ``ALE/Breakout-v5``, ``BreakoutNoFrameskip-v4``, ``up_n_down``, ``Up and Down``, ``James Bond``
    all resolve. Raises ``ValueError`` (one line, with close suggestions) for an unknown name.
    """
    table = _lookup()
    for candidate in (name, _gym_name(name)):
        game = table.get(_key(candidate))
        if game is not None:
            return game
    close = difflib.get_close_matches(_key(_gym_name(name)), table, n=5, cutoff=0.6)
    suggestions = list(dict.fromkeys(table[key].rom_id for key in close))
    hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else "."
    raise ValueError(f"unknown game {name!r} (env.game){hint} {_ACCEPTED}")


# --- Normalization and the PER paper's published scores -------------------------------------

PROTOCOLS = ("noop", "human_starts")
_TABLE7_CSV_NAME = "per_paper_table7_human_starts.csv"
# Table 7's agent columns, in the paper's order.
PAPER_COLUMNS = ("dqn", "gorila", "dqn_rank", "ddqn", "ddqn_rank", "ddqn_prop")


def reference_scores(game: str, protocol: str) -> tuple[float, float]:
    """(random, human) scores of ``game`` under ``protocol`` ("noop" or "human_starts")."""
    spec = resolve_game(game)
    if protocol == "noop":
        return spec.noop_random, spec.noop_human
    if protocol == "human_starts":
        return spec.human_starts_random, spec.human_starts_human
    raise ValueError(f"protocol={protocol!r} is not allowed: must be one of {', '.join(PROTOCOLS)}")


def normalized_score(score: float, game: str, protocol: str) -> float:
    """Human-normalized score (agent - random) / |human - random| (PER paper, Equation 4).

    0.0 is random play, 1.0 is the human, with the reference pair of ``protocol``. The absolute
    value only matters for Video Pinball, whose random score beats the human's.
    """
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
    path = resources.files(__package__).joinpath("data", _TABLE7_CSV_NAME)
    table = {}
    for row in csv.DictReader(path.read_text("utf-8").splitlines()):
        agents = {column: float(row[column]) if row[column] else None for column in PAPER_COLUMNS}
        table[row["rom_id"]] = PaperScores(
            row["rom_id"], float(row["random"]), float(row["human"]), **agents
        )
    return table


def paper_scores(game: str) -> PaperScores:
    """The PER paper's Table 7 row for ``game`` (any name :func:`resolve_game` accepts)."""
    return _paper_table()[resolve_game(game).rom_id]
