"""The score table evaluate.py prints and writes, on hand-made run scores: which tables are
human-normalized, what names their games have, how the episode cap is titled."""

import dataclasses

import pytest

from evaluation.protocol_registry import PROTOCOLS
from reporting.score_table import (
    RAW_GAME_COLUMNS,
    RunScore,
    cap_text,
    format_table,
    game_rows,
    normalizes,
    summaries,
    table_title,
)


def score(game: str, env_kind: str, mean: float) -> RunScore:
    return RunScore(
        run=f"{game}-run",
        game=game,
        variant="uniform",
        seed=0,
        step=1,
        frames=1,
        episodes=2,
        mean=mean,
        std=0.5,
        normalized=None,
        partial=False,
        env_kind=env_kind,
    )


@pytest.mark.parametrize(
    ("protocol", "runs", "normalized"),
    [
        ("noop", [score("breakout", "minatar", 3.0)], False),  # no human reference
        ("noop", [score("pong", "atari", -20.0), score("breakout", "minatar", 3.0)], False),
        ("episodes", [score("pong", "atari", -20.0)], False),  # a raw-score protocol
        ("noop", [score("pong", "atari", -20.0)], True),
    ],
)
def test_the_score_table_normalizes_only_with_a_reference_and_human_reference_games(
    protocol, runs, normalized
):
    """Even a protocol with a reference table (whose refusal evaluate.py does first) gets the
    raw table for a game without human reference scores: no normalized or paper column."""
    protocol = PROTOCOLS[protocol]
    assert normalizes(protocol, runs) is normalized
    rows = game_rows(runs, protocol)
    table = format_table(
        {"title": "t", "normalized": normalized, "paper_note": "paper: note"},
        rows,
        summaries(runs, rows, protocol, reps=10, seed=0),
    )
    assert ("normalized" in table and "paper" in table) is normalized
    assert all(("normalized" in row) is normalized for row in rows)
    if not normalized:
        assert all(tuple(row) == RAW_GAME_COLUMNS for row in rows)
        names = {"pong": "Pong", "breakout": "breakout"}  # Atari's display name, MinAtar's id
        assert sorted(row["game"] for row in rows) == sorted(names[run.game] for run in runs)


def test_a_long_variant_name_is_printed_whole_with_the_columns_aligned():
    """Two variants that share their first 12 characters stay two names in the table."""
    runs = [score("pong", "atari", -20.0), score("pong", "atari", -19.0)]
    runs[1] = dataclasses.replace(runs[1], variant="uniform-keep_maximum_step", run="other")
    protocol = PROTOCOLS["noop"]
    rows = game_rows(runs, protocol)
    header = {"title": "t", "normalized": True, "paper_note": "paper: note"}
    lines = format_table(header, rows, summaries(runs, rows, protocol, reps=10, seed=0))
    table = lines.splitlines()[2:5]
    assert [line.split()[1] for line in table] == [
        "variant",
        "uniform",
        "uniform-keep_maximum_step",
    ]
    ends = [table[0].index("normalized") + len("normalized")]
    ends += [line.index("%") + 1 for line in table[1:]]  # the normalized column's right edge
    assert len(set(ends)) == 1


def test_minatar_games_keep_their_own_names():
    (row,) = game_rows([score("space_invaders", "minatar", 1.0)], PROTOCOLS["episodes"])
    assert (row["game"], row["game_id"]) == ("space_invaders", "space_invaders")


@pytest.mark.parametrize(
    ("caps", "text"),
    [
        ([108_000], "episodes capped at 108,000 frames"),
        ([18_000, 108_000], "episodes capped at 18,000/108,000 frames"),
        ([0], "episodes not capped"),
        ([0, 108_000], "episodes capped at 108,000 frames or not capped"),
    ],
)
def test_the_title_names_the_episode_caps(caps, text):
    assert cap_text(caps) == text


def test_the_title_joins_what_differs_between_runs():
    title = table_title(PROTOCOLS["episodes"], [0, 30], [0.01, 0.05], [0, 108_000], 5)
    assert title == (
        "Episodes from the env's own reset (no no-ops/1-30 random no-ops; ε 0.01/0.05, 5 "
        "episodes per run), raw scores, not human-normalized; episodes capped at 108,000 frames "
        "or not capped"
    )
