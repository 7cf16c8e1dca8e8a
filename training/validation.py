"""Validation of a run's config: every bad setting is one line naming the key and what is
allowed, raised before anything is allocated or written."""

import math
from collections.abc import Callable

from omegaconf import DictConfig, OmegaConf

from agents.double_dqn import resolve_device
from envs.games import resolve_game
from replay.priorities import WEIGHT_NORMALIZATIONS

REPLAY_KINDS = ("uniform", "proportional", "rank_based")
LIFE_LOSS_RULES = ("new_episode", "stop_bootstrap")
POSITIVE_INTEGERS = (
    "train.total_steps",
    "train.batch_size",
    "train.update_period_steps",
    "train.target_update_period_steps",
    "train.log_period_steps",
    "train.priority_histogram_period_steps",
    "checkpoint.every_steps",
    "agent.history_length",
    "env.frame_skip",
)
NON_NEGATIVE_INTEGERS = (
    "seed",
    "train.epsilon_decay_steps",
    "env.noop_max",
    "env.max_episode_frames",
)
FRACTIONS = (
    "train.epsilon_start",
    "train.epsilon_final",
    "replay.importance_exponent",
    "replay.importance_exponent_final",
    "agent.discount",
    "env.repeat_action_probability",
)
POSITIVE_NUMBERS = (
    "train.reward_clip",
    "agent.learning_rate",
    "agent.rmsprop_epsilon",
    "agent.td_error_clip",
)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return (_integer(value) or isinstance(value, float)) and math.isfinite(value)


def _positive_integer(value) -> bool:
    return _integer(value) and value > 0


def _non_negative_integer(value) -> bool:
    return _integer(value) and value >= 0


def _fraction(value) -> bool:
    return _number(value) and 0 <= value <= 1


def _positive_number(value) -> bool:
    return _number(value) and value > 0


def _rules(cfg: DictConfig) -> list[tuple[str, str, Callable[[object], bool]]]:
    """(key, what is allowed, test of the value) in checking order; a test may rely on the
    keys checked before it."""
    t, kind = cfg.train, cfg.replay.kind
    rules = [("replay.kind", f"one of {', '.join(REPLAY_KINDS)}", lambda v: v in REPLAY_KINDS)]
    rules += [(key, "a positive integer", _positive_integer) for key in POSITIVE_INTEGERS]
    rules += [(key, "an integer >= 0", _non_negative_integer) for key in NON_NEGATIVE_INTEGERS]
    rules += [(key, "in [0, 1]", _fraction) for key in FRACTIONS]
    rules += [(key, "a number > 0", _positive_number) for key in POSITIVE_NUMBERS]
    rules += [
        (
            "replay.capacity",
            "at least train.batch_size and agent.history_length + 2, an integer",
            lambda v: _integer(v) and v >= max(t.batch_size, cfg.agent.history_length + 2),
        ),
        (
            "train.learning_start_steps",
            "at least train.batch_size, an integer",
            lambda v: _integer(v) and v >= t.batch_size,
        ),
        (
            "checkpoint.keep",
            "an integer >= 2 (a complete checkpoint must survive a failed save)",
            lambda v: _integer(v) and v >= 2,
        ),
        (
            "replay.weight_normalization",
            f"one of {', '.join(WEIGHT_NORMALIZATIONS)}",
            lambda v: v in WEIGHT_NORMALIZATIONS,
        ),
        (
            "train.life_loss",
            f"one of {', '.join(LIFE_LOSS_RULES)}",
            lambda v: v in LIFE_LOSS_RULES,
        ),
        ("agent.rmsprop_decay", "in [0, 1)", lambda v: _number(v) and 0 <= v < 1),
        ("env.screen_size", "84, the Nature network's input", lambda v: _integer(v) and v == 84),
        ("env.full_action_space", "true or false", lambda v: isinstance(v, bool)),
        ("env.game", "a game name", lambda v: isinstance(v, str)),
        ("agent.device", "a device name", lambda v: isinstance(v, str)),
        (
            "evaluation.every_frames",
            "a positive multiple of env.frame_skip",
            lambda v: _positive_integer(v) and v % cfg.env.frame_skip == 0,
        ),
        ("evaluation.frames", "a positive integer", _positive_integer),
        ("evaluation.epsilon", "in [0, 1]", _fraction),
    ]
    if kind != "uniform":
        rules += [
            ("replay.priority_exponent", ">= 0", lambda v: _number(v) and v >= 0),
            (
                "replay.priority_exponent_final",
                "null or >= 0",
                lambda v: v is None or _number(v) and v >= 0,
            ),
            ("replay.priority_epsilon", "> 0", _positive_number),
        ]
    if kind == "rank_based":
        rules.append(("replay.resort_period", "a positive integer", _positive_integer))
    return rules


def validate_config(cfg: DictConfig) -> None:
    """Reject bad settings with one line naming the key, before anything is allocated."""
    for key, allowed, test in _rules(cfg):
        value = OmegaConf.select(cfg, key)
        if not test(value):
            raise ValueError(f"{key}={value} is not allowed: must be {allowed}")
    resolve_game(cfg.env.game)
    resolve_device(cfg.agent.device)
