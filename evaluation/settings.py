"""evaluate.py's settings, the `key=value` arguments after its path; its `env.KEY=V` arguments
are settings of each evaluated run's env kind, read by its schema (`evaluate.check_runs`)."""

from dataclasses import dataclass

from evaluation.protocol_registry import PROTOCOLS
from evaluation.runs import SNAPSHOT_NAMES
from schema import (
    BOOLEAN,
    DEVICE,
    FRACTION,
    NON_NEGATIVE_INTEGER,
    PATH,
    Rule,
    Settings,
    one_of,
    setting,
)

# Beyond these an evaluation would take days (100,000 MinAtar episodes: hours) or its bootstrap
# not fit in memory.
MOST_EPISODES, MOST_BOOTSTRAP_REPS = 100_000, 1_000_000


def positive_up_to(most: int) -> Rule:
    return Rule(f"a positive integer, at most {most}", lambda v: 0 < v <= most)


@dataclass(frozen=True, kw_only=True)
class EvaluateSettings(Settings):
    """What evaluate.py evaluates a snapshot, a run or a sweep with."""

    # noop | human_starts | episodes (evaluation.protocol_registry, also one registered later);
    # None: the first that can evaluate every run's env kind (`evaluate.choose_protocol`)
    protocol: str | None = setting(None, one_of(PROTOCOLS))
    snapshot: str = setting("best", one_of(SNAPSHOT_NAMES))  # which one of a run directory
    episodes: int | None = setting(None, positive_up_to(MOST_EPISODES))
    epsilon: float | None = setting(None, FRACTION)  # the protocol's
    start_states: str | None = setting(None, PATH)  # a file, or a directory of <rom_id>.npz
    seed: int = setting(0, NON_NEGATIVE_INTEGER)  # every evaluation env and ε draw
    device: str = setting("auto", DEVICE)
    cuda_graphs: bool = setting(False, BOOLEAN)  # act through a captured forward pass
    output: str | None = setting(None, PATH)  # None: the evaluated directory
    bootstrap_reps: int = setting(2000, positive_up_to(MOST_BOOTSTRAP_REPS))  # the IQM interval's
