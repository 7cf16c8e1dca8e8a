"""The replay's settings (the config's `replay` section), one schema per sampler: each sampler
names its own (`settings`), and its `configs/replay/<kind>.yaml` preset builds on it.
`kind` chooses the sampler and `eviction` the storage that forgets when the memory is full."""

import re
from dataclasses import MISSING, dataclass
from typing import ClassVar

from replay.priorities import WEIGHT_NORMALIZATIONS
from replay.priority_signals import PRIORITY_SIGNALS
from schema import (
    FRACTION,
    NON_NEGATIVE_NUMBER,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    Rule,
    Settings,
    one_of,
    refusal,
    setting,
)

SAMPLERS, STORAGES = {}, {}
KIND = one_of(SAMPLERS, "replay.registry")
CAPACITY = Rule(  # the bounds from the train and agent sections: `launch.validation`
    "at least train.batch_size and agent.history_length + 2, an integer", POSITIVE_INTEGER.test
)
FINAL_IMPORTANCE_EXPONENT = Rule(  # β only rises (`check_together`)
    "at least replay.importance_exponent (β rises to it) and at most 1", FRACTION.test
)
DEVICE = Rule(  # the learner's CUDA device: `launch.run_guard`; the eviction: `check_together`
    "cpu, or agent.device's CUDA device with replay.eviction=fifo",
    lambda v: re.fullmatch("cpu|cuda(:[0-9]+)?", v),
)


@dataclass(frozen=True, kw_only=True)
class ReplaySettings(Settings):
    """Every replay kind's settings, and all of uniform replay's."""

    section: ClassVar[str] = "replay"

    kind: str = setting("uniform", KIND, "identity", "hyperparameter")
    capacity: int = setting(1_000_000, CAPACITY, "identity")
    # td_error (the paper's) | huber_loss | td_error_change | parameter_change
    priority_signal: str = setting("td_error", one_of(PRIORITY_SIGNALS))
    # ε of the priorities p = signal + ε (uniform draws ignore them, forgetting by priority not)
    priority_epsilon: float = setting(0.01, POSITIVE_NUMBER)
    # fifo (the paper's) | lowest_priority
    eviction: str = setting("fifo", one_of(STORAGES, "replay.registry"), "identity")
    device: str = setting("cpu", DEVICE)  # cuda: a copy of the frame ring on the learner's GPU
    # batch (the authors') | buffer; uniform weights are exactly 1 either way
    weight_normalization: str = setting("batch", one_of(WEIGHT_NORMALIZATIONS))
    # β0, annealed linearly to the next at its final step
    importance_exponent: float = setting(0.0, FRACTION, "hyperparameter")
    importance_exponent_final: float = setting(0.0, FINAL_IMPORTANCE_EXPONENT)
    # the step where β reaches its final value; null: the run's last step
    importance_exponent_final_step: int | None = setting(
        None, Rule("null (the last step) or a positive integer", POSITIVE_INTEGER.test)
    )

    def check_together(self) -> None:
        if self.importance_exponent_final < self.importance_exponent:
            key = self.key("importance_exponent_final")
            raise refusal(key, self.importance_exponent_final, FINAL_IMPORTANCE_EXPONENT.allowed)
        if self.device != "cpu" and self.eviction != "fifo":
            raise refusal(self.key("device"), self.device, DEVICE.allowed)


@dataclass(frozen=True, kw_only=True)
class PrioritizedReplaySettings(ReplaySettings):
    """Every prioritized kind's settings: α, whose default is each kind's, and β rising to 1."""

    priority_exponent: float = setting(MISSING, NON_NEGATIVE_NUMBER, "hyperparameter")  # α
    # set to anneal α linearly to this value at the end
    priority_exponent_final: float | None = setting(
        None, Rule("null or >= 0", NON_NEGATIVE_NUMBER.test)
    )
    # how often an annealed α changes (a rebuild of the sampler's tree)
    priority_exponent_period_steps: int = setting(10_000, POSITIVE_INTEGER)
    importance_exponent_final: float = setting(1.0, FINAL_IMPORTANCE_EXPONENT)  # β's end


@dataclass(frozen=True, kw_only=True)
class ProportionalReplaySettings(PrioritizedReplaySettings):
    """Proportional prioritization as in Table 3 of Schaul et al. (2016)."""

    kind: str = setting("proportional", KIND, "identity", "hyperparameter")
    priority_exponent: float = setting(0.6, NON_NEGATIVE_NUMBER, "hyperparameter")  # α
    importance_exponent: float = setting(0.4, FRACTION, "hyperparameter")  # β0


@dataclass(frozen=True, kw_only=True)
class RankBasedReplaySettings(PrioritizedReplaySettings):
    """Rank-based prioritization as in Table 3 of Schaul et al. (2016)."""

    kind: str = setting("rank_based", KIND, "identity", "hyperparameter")
    priority_exponent: float = setting(0.7, NON_NEGATIVE_NUMBER, "hyperparameter")  # α
    importance_exponent: float = setting(0.5, FRACTION, "hyperparameter")  # β0
    # a full sort of the heap every 10^6 added transitions
    resort_period: int = setting(1_000_000, POSITIVE_INTEGER)
