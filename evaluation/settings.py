"""evaluate.py's settings, the `key=value` arguments after its path, read by `schema.typed`
as a run's sections are. The `env.KEY=V` arguments are no setting of it: they are settings of
each evaluated run's env kind, read by that kind's schema once the runs are found
(`evaluate.check_runs`)."""

from dataclasses import dataclass

from evaluation.protocol_registry import PROTOCOLS
from evaluation.runs import SNAPSHOT_NAMES
from schema import BOOLEAN, FRACTION, NON_NEGATIVE_INTEGER, Rule, Settings, one_of, setting

# The largest counts allowed: beyond them an evaluation would run for days (100,000 episodes
# of MinAtar's shortest games take hours) or the bootstrap would not fit in memory.
MOST_EPISODES, MOST_BOOTSTRAP_REPS = 100_000, 1_000_000


def positive_up_to(most: int) -> Rule:
    return Rule(f"a positive integer, at most {most}", lambda v: 0 < v <= most)


PATH = Rule("a path")


@dataclass(frozen=True, kw_only=True)
class EvaluateSettings(Settings):
    """What evaluate.py evaluates a snapshot, a run or a sweep with."""

    # noop | human_starts | episodes (evaluation.protocol_registry); None: the first that can
    # evaluate every run's env kind (`evaluate.choose_protocol`). Looked up when checked, so
    # that a protocol registered later (a test's) is allowed too.
    protocol: str | None = setting(None, one_of(PROTOCOLS))
    snapshot: str = setting("best", one_of(SNAPSHOT_NAMES))  # which one of a run directory
    episodes: int | None = setting(None, positive_up_to(MOST_EPISODES))
    epsilon: float | None = setting(None, FRACTION)  # the protocol's
    start_states: str | None = setting(None, PATH)  # a file, or a directory of <rom_id>.npz
    seed: int = setting(0, NON_NEGATIVE_INTEGER)  # every evaluation env and ε draw
    device: str = setting("auto", Rule("auto, cpu or cuda[:N]"))
    cuda_graphs: bool = setting(False, BOOLEAN)  # act through a captured forward pass
    output: str | None = setting(None, PATH)  # None: the evaluated directory
    # the IQM interval's resamples
    bootstrap_reps: int = setting(2000, positive_up_to(MOST_BOOTSTRAP_REPS))
