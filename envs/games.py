"""The Atari-57 games: ROM ids, gymnasium ids and display names, and finding one by any of them.

The table lives in ``envs/data/atari57_games.csv`` (sources in ``envs/data/README.md``); the
games' reference scores are the evaluation's (``evaluation/scores.py``).
"""

from __future__ import annotations

import csv
import difflib
import functools
import re
from dataclasses import dataclass
from importlib import resources

from schema import shown

_CSV_NAME = "atari57_games.csv"
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
    """One Atari game: its names."""

    name: str  # display name, e.g. "Breakout", "Up'n Down"
    rom_id: str  # ale-py ROM id, e.g. "up_n_down"
    gym_id: str  # gymnasium id, e.g. "ALE/UpNDown-v5"
    aliases: tuple[str, ...] = ()  # other display spellings, e.g. ("Up and Down",)


def _key(text: str) -> str:
    """Case, spaces and punctuation are not significant in game names."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _parse_display(column: str) -> tuple[str, tuple[str, ...]]:
    """(name, aliases) of the csv's game column: a ``(…)`` part is an alias, a ``*`` dropped."""
    match = re.fullmatch(r"(?P<name>.*?)\s*(?:\((?P<alias>[^)]*)\))?\s*", column)
    name = match["name"].rstrip("*").strip()
    alias = (match["alias"] or "").strip()
    return name, ((alias,) if alias else ())


@functools.cache
def all_games() -> tuple[Game, ...]:
    """The 57 games in the csv's order."""
    text = resources.files(__package__).joinpath("data", _CSV_NAME).read_text("utf-8")
    games = []
    for row in csv.DictReader(text.splitlines()):
        name, aliases = _parse_display(row["game"])
        games.append(Game(name, row["rom_id"], row["gym_id"], aliases))
    return tuple(games)


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
    """Find a game by ROM id, display name or gymnasium id, ignoring case, spaces and
    punctuation; a one-line ValueError with close suggestions for an unknown name."""
    table = _lookup()
    for candidate in (name, _gym_name(name)):
        game = table.get(_key(candidate))
        if game is not None:
            return game
    close = difflib.get_close_matches(_key(_gym_name(name)), table, n=5, cutoff=0.6)
    suggestions = list(dict.fromkeys(table[key].rom_id for key in close))
    hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else "."
    raise ValueError(f"unknown game {shown(repr(name))} (env.game){hint} {_ACCEPTED}")
