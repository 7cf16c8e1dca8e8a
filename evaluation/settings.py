"""evaluate.py's settings, the `key=value` arguments after its path: one schema (each setting's
type, default and rule), checked once when the command line is read. The `env.KEY=V`
arguments are no setting of it: they are settings of each evaluated run's env kind, checked
against that kind's schema once the runs are found (`evaluate.check_runs`)."""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.protocol_registry import PROTOCOLS
from evaluation.runs import SNAPSHOT_NAMES
from schema import (
    BOOLEAN,
    FRACTION,
    NON_NEGATIVE_INTEGER,
    IntegerRule,
    Rule,
    Schema,
    none_or,
    one_of,
    setting,
    text,
)

# The largest counts allowed: beyond them an evaluation would run for days (100,000 episodes
# of MinAtar's shortest games take hours) or the bootstrap would not fit in memory.
MOST_EPISODES, MOST_BOOTSTRAP_REPS = 100_000, 1_000_000


def positive_up_to(most: int) -> IntegerRule:
    return IntegerRule(f"a positive integer, at most {most}", lambda v: 0 < v <= most)


EPISODES = positive_up_to(MOST_EPISODES)


# Looked up when checked, so that a protocol registered later (a test's) is allowed too.
PROTOCOL = Rule(
    f"one of {', '.join(PROTOCOLS)}", lambda v: v is None or (isinstance(v, str) and v in PROTOCOLS)
)
PATH = none_or(text("a path"), "a path")


@dataclass(frozen=True, kw_only=True)
class EvaluateSettings(Schema):
    """What evaluate.py evaluates a snapshot, a run or a sweep with."""

    # noop | human_starts | episodes (evaluation.protocol_registry); None: the first that can
    # evaluate every run's env kind (`evaluate.choose_protocol`).
    protocol: str | None = setting(None, rule=PROTOCOL)
    snapshot: str = setting("best", rule=one_of(SNAPSHOT_NAMES))  # which one of a run directory
    episodes: int | None = setting(None, rule=none_or(EPISODES, EPISODES.allowed))
    epsilon: float | None = setting(None, rule=none_or(FRACTION, "in [0, 1]"))  # the protocol's
    start_states: str | None = setting(None, rule=PATH)  # a file, or a directory of <rom_id>.npz
    seed: int = setting(0, rule=NON_NEGATIVE_INTEGER)  # every evaluation env and ε draw
    device: str = setting("auto", rule=text("auto, cpu or cuda[:N]"))
    cuda_graphs: bool = setting(False, rule=BOOLEAN)  # act through a captured forward pass
    output: str | None = setting(None, rule=PATH)  # None: the evaluated directory
    # the IQM interval's resamples
    bootstrap_reps: int = setting(2000, rule=positive_up_to(MOST_BOOTSTRAP_REPS))
