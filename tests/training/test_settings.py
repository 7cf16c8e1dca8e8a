"""Settings the libraries that use them cannot hold, and schedules that run the wrong way, are
refused by their schemas (read by `schema.typed`) in one line naming the key and what is
allowed."""

import pytest

from agents.settings import AgentSettings
from envs.settings import AtariSettings, MinAtarSettings
from replay.settings import RankBasedReplaySettings, ReplaySettings
from schema import typed
from training.settings import CheckpointSettings, EvaluationSettings, RunSettings, TrainSettings

BEYOND = 2**63  # one past the largest signed 64-bit integer
INTEGER_SETTINGS = [
    (AtariSettings, "noop_max", "an integer >= 0, at most 9223372036854775807"),
    (AtariSettings, "screen_size", "a positive integer, at most 9223372036854775807"),
    (MinAtarSettings, "max_episode_frames", "an integer >= 0, at most 9223372036854775807"),
    (TrainSettings, "total_steps", "a positive integer, at most 9223372036854775807"),
    (TrainSettings, "epsilon_decay_steps", "an integer >= 0, at most 9223372036854775807"),
    (
        EvaluationSettings,
        "every_frames",
        "a positive multiple of env.frame_skip, at most 9223372036854775807",
    ),
    (
        CheckpointSettings,
        "keep",
        "an integer >= 2 (a complete checkpoint must survive a failed save), at most "
        "9223372036854775807",
    ),
    (AgentSettings, "history_length", "a positive integer, at most 9223372036854775807"),
    (
        RankBasedReplaySettings,
        "resort_period",
        "a positive integer, at most 9223372036854775807",
    ),
    (
        ReplaySettings,
        "importance_exponent_final_step",
        "null (the last step) or a positive integer, at most 9223372036854775807",
    ),
    (RunSettings, "seed", "an integer from 0 to 9223372036854775807"),
]


@pytest.mark.parametrize(
    ("schema", "name", "allowed"),
    INTEGER_SETTINGS,
    ids=[schema.key(name) for schema, name, _ in INTEGER_SETTINGS],
)
def test_integers_beyond_64_bits_are_refused(schema, name, allowed):
    with pytest.raises(ValueError) as error:
        typed(schema, {name: BEYOND})
    assert str(error.value) == f"{schema.key(name)}={BEYOND} is not allowed: must be {allowed}"
    typed(schema, {name: BEYOND - 1})  # the largest is allowed where its rule allows it


def test_a_rising_epsilon_is_refused_and_a_constant_one_allowed():
    with pytest.raises(ValueError) as error:
        typed(TrainSettings, {"epsilon_start": 0.01, "epsilon_final": 1})
    assert str(error.value) == (
        "train.epsilon_final=1 is not allowed: must be in [0, train.epsilon_start] (ε falls to it)"
    )
    assert typed(TrainSettings, {"epsilon_start": 0.5, "epsilon_final": 0.5}).epsilon_final == 0.5
