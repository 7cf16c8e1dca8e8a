import csv
from pathlib import Path

import ale_py
import gymnasium as gym
import pytest

from envs.games import Game, all_games, resolve_game

gym.register_envs(ale_py)

CSV = Path(__file__).resolve().parents[2] / "envs" / "data" / "atari57_games.csv"
ROWS = list(csv.DictReader(CSV.read_text().splitlines()))


def test_table_has_the_57_games_once():
    games = all_games()
    assert len(games) == len(ROWS) == 57
    assert len({g.rom_id for g in games}) == 57
    assert len({g.gym_id for g in games}) == 57


@pytest.mark.parametrize("row", ROWS, ids=[r["rom_id"] for r in ROWS])
def test_every_row_resolves_to_itself(row):
    game = resolve_game(row["rom_id"])
    assert game.rom_id == row["rom_id"] and game.gym_id == row["gym_id"]
    gym_name = row["gym_id"].removeprefix("ALE/").removesuffix("-v5")
    spellings = [
        row["game"],  # the csv's column verbatim, e.g. "Up'n Down (Up and Down)", "Berzerk*"
        game.name,
        *game.aliases,
        row["gym_id"],
        f"{gym_name}-v5",
        f"{gym_name}NoFrameskip-v4",
        row["rom_id"].upper(),
    ]
    for spelling in spellings:
        assert resolve_game(spelling) is game, spelling


@pytest.mark.parametrize("game", all_games(), ids=lambda g: g.rom_id)
def test_ids_match_ale_py(game):
    assert game.rom_id in ale_py.roms.get_all_rom_ids()
    assert ale_py.roms.get_rom_path(game.rom_id).is_file()
    assert gym.spec(game.gym_id).kwargs["game"] == game.rom_id


def test_a_row_is_a_game():
    assert resolve_game("breakout") == Game(
        name="Breakout", rom_id="breakout", gym_id="ALE/Breakout-v5"
    )


def test_display_names_are_cleaned():
    assert resolve_game("up_n_down").name == "Up'n Down"
    assert resolve_game("up_n_down").aliases == ("Up and Down",)
    assert resolve_game("berzerk").name == "Berzerk"
    assert resolve_game("pitfall").name == "Pitfall!"
    assert resolve_game("qbert").name == "Q*bert"


@pytest.mark.parametrize(
    ("spelling", "rom_id"),
    [
        ("BREAKOUT", "breakout"),
        ("  Breakout ", "breakout"),
        ("ale/breakout-v5", "breakout"),
        ("BreakoutDeterministic-v4", "breakout"),
        ("Up and Down", "up_n_down"),
        ("up-n-down", "up_n_down"),
        ("UpNDown", "up_n_down"),
        ("James Bond", "jamesbond"),
        ("James Bond 007", "jamesbond"),
        ("ALE/Jamesbond-v5", "jamesbond"),
        ("space invaders", "space_invaders"),
        ("SpaceInvaders", "space_invaders"),
        ("Montezuma's Revenge", "montezuma_revenge"),
        ("montezumas-revenge", "montezuma_revenge"),
        ("Battlezone", "battle_zone"),
        ("battle zone", "battle_zone"),
        ("Q*bert", "qbert"),
        ("H.E.R.O.", "hero"),
        ("Kung-Fu Master", "kung_fu_master"),
        ("Ms. Pac-Man", "ms_pacman"),
        ("MsPacmanNoFrameskip-v4", "ms_pacman"),
        ("River Raid", "riverraid"),
        ("Stargunner", "star_gunner"),
    ],
)
def test_spelling_variants(spelling, rom_id):
    assert resolve_game(spelling).rom_id == rom_id


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("brekout", "breakout"), ("ALE/Brekout-v5", "breakout"), ("space_invader", "space_invaders")],
)
def test_unknown_name_gives_one_line_error_with_suggestion(name, suggestion):
    with pytest.raises(ValueError) as excinfo:
        resolve_game(name)
    message = str(excinfo.value)
    assert "\n" not in message
    assert repr(name) in message
    assert "env.game" in message
    assert f"did you mean: {suggestion}" in message
    assert "ALE/Breakout-v5" in message  # says which forms are accepted


def test_unknown_name_without_close_match_still_explains():
    with pytest.raises(ValueError, match=r"^unknown game 'xyzzy' \(env\.game\)\. Accepted: "):
        resolve_game("xyzzy")
