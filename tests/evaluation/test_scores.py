"""Human-normalized scores: the PER paper's Table 7 -> Table 6, and the two reference tables."""

import csv
from pathlib import Path

import pytest

from envs.games import all_games
from evaluation.scores import normalized_score, paper_scores, reference_scores

ROOT = Path(__file__).resolve().parents[2]
TABLE6 = Path(__file__).parent / "data" / "per_paper_table6_normalized.csv"
TABLE6_ROWS = list(csv.DictReader(TABLE6.read_text("utf-8").splitlines()))
TABLE6_COLUMNS = ("dqn", "dqn_rank", "ddqn", "ddqn_rank", "ddqn_prop")


def percent(game: str, column: str) -> float:
    return 100 * normalized_score(getattr(paper_scores(game), column), game, "human_starts")


@pytest.mark.parametrize("row", TABLE6_ROWS, ids=[r["rom_id"] for r in TABLE6_ROWS])
def test_table7_normalizes_to_every_published_table6_percentage(row):
    """The paper prints whole percents: each cell is our value rounded (|error| <= 0.5), and a
    printed "-0" is a small negative value, not a positive one."""
    for column in TABLE6_COLUMNS:
        published = row[column]
        raw = getattr(paper_scores(row["rom_id"]), column)
        if published == "":
            assert raw is None, column
            continue
        ours = percent(row["rom_id"], column)
        assert abs(ours - float(published)) <= 0.5, (column, ours, published)
        if published == "-0":
            assert ours < 0, column


@pytest.mark.parametrize(
    ("game", "column", "published"),
    [
        # Read off the paper's Table 6 text; includes Video Pinball (random > human: the |...|
        # of Equation 4 matters), negative scores and the largest ratios.
        ("Alien", "ddqn", 14),
        ("Asterix", "dqn", -1),
        ("Atlantis", "ddqn_prop", 4425),
        ("Breakout", "dqn", 1149),
        ("Double Dunk", "ddqn_rank", 2000),
        ("Skiing", "dqn_rank", -122),
        ("Space Invaders", "ddqn_prop", 693),
        ("Video Pinball", "ddqn", 7221),
        ("Video Pinball", "dqn", -5),
        ("Up'n Down", "ddqn_prop", 313),
    ],
)
def test_hand_picked_table6_cells(game, column, published):
    assert round(percent(game, column)) == published


def test_table7_reference_columns_are_the_human_starts_reference_scores():
    for game in all_games():
        row = paper_scores(game.rom_id)
        assert (row.random, row.human) == reference_scores(game.rom_id, "human_starts")


def test_the_reference_table_has_a_row_for_each_game_in_order():
    reference_csv = ROOT / "evaluation" / "data" / "atari57_reference_scores.csv"
    rows = list(csv.DictReader(reference_csv.read_text("utf-8").splitlines()))
    assert [row["rom_id"] for row in rows] == [game.rom_id for game in all_games()]


def test_reference_numbers_are_floats_from_the_table():
    assert reference_scores("breakout", "human_starts") == (1.6, 27.9)
    assert reference_scores("breakout", "noop") == (1.7, 30.5)
    assert all(
        isinstance(value, float)
        for game in all_games()
        for protocol in ("noop", "human_starts")
        for value in reference_scores(game.rom_id, protocol)
    )


def test_each_protocol_uses_its_own_reference_pair():
    # Breakout: human starts random 1.6, human 27.9; no-op starts random 1.7, human 30.5.
    assert normalized_score(27.9, "breakout", "human_starts") == 1.0
    assert normalized_score(1.6, "breakout", "human_starts") == 0.0
    assert normalized_score(30.5, "breakout", "noop") == 1.0
    assert normalized_score(1.7, "breakout", "noop") == 0.0
    assert normalized_score(16.1, "breakout", "noop") == pytest.approx(0.5)


@pytest.mark.parametrize("name", ["up_n_down", "Up'n Down", "Up and Down", "ALE/UpNDown-v5"])
def test_any_accepted_game_name_reaches_the_scores(name):
    assert paper_scores(name).rom_id == "up_n_down"
    assert reference_scores(name, "noop") == reference_scores("up_n_down", "noop")
    assert normalized_score(9896.1, name, "human_starts") == 1.0


def test_bad_protocol_and_game_are_one_line_errors():
    with pytest.raises(ValueError, match=r"protocol='human' is not allowed: must be one of") as e:
        normalized_score(1.0, "pong", "human")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="unknown game 'pongg'"):
        normalized_score(1.0, "pongg", "noop")
