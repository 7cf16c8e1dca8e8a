"""Replay strategies for the Blind Cliffwalk: which memory transition to learn from next, one
Q-learning update at a time on a full memory, until the MSE to Q* is below the tolerance or
`max_updates` is spent. The stochastic ones use the project's samplers, with priorities from |δ|
(the paper's) or, as `proportional:td_error_change` etc., another learning-progress signal
(`LearningProgress`); none uses importance weights, as Appendix B.1's plain update has none.
"""

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from cliffwalk.learners import TOLERANCE, QLearner
from replay.priority_signals import SignalInputs, signal_named
from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import UniformSampler


@dataclass(frozen=True)
class ReplaySettings:
    """Budget, prioritization and streaming memory settings shared by every run of an
    experiment. The paper states no α for the Cliffwalk: the defaults are its Atari values
    (Table 3)."""

    max_updates: int = 10_000_000
    tolerance: float = TOLERANCE
    proportional_exponent: float = 0.6
    rank_exponent: float = 0.7
    priority_epsilon: float = 0.01
    rank_segments: int = 32  # k of the rank-based sampler (`SamplerChoice`)
    # A streaming memory's (`cliffwalk.streaming`): its capacity as a fraction of 2^(n+1) − 2
    # (at least 1), and the updates per arriving transition (8: DQN's average, Section 4).
    memory_fraction: float = 0.25
    replay_ratio: int = 8


CONVERGED, CAPPED, STALLED = "converged", "capped", "stalled"
# The oracle is stalled when its best update would lower the loss by less than this fraction.
STALL_FRACTION = 1e-12


@dataclass(frozen=True)
class Outcome:
    """How a run ended (CONVERGED, CAPPED or STALLED), after how many updates."""

    updates: int
    status: str


def replay_uniform(learner: QLearner, rng: np.random.Generator, settings: ReplaySettings):
    """Uniform replay, drawn in blocks: uniform draws ignore TD errors, so a block of B draws
    is distributed exactly like B single draws."""
    sampler = _filled(UniformSampler(len(learner.memory), rng), len(learner.memory))
    made, block = 0, 4096
    while made < settings.max_updates:
        size = min(block, settings.max_updates - made)
        indices, _ = sampler.sample(size)
        converged_after = learner.replay_sequence(indices, settings.tolerance)
        if converged_after is not None:
            return Outcome(made + converged_after, CONVERGED)
        made, block = made + size, min(2 * block, 1 << 20)
    return Outcome(made, CAPPED)


def replay_oracle(learner: QLearner, rng: np.random.Generator, settings: ReplaySettings):
    """The hindsight oracle: each update uses the transition after whose update the MSE to Q*
    is smallest. Updating pair c moves Q of pair j by η δ_c K_cj with K = ΦΦᵀ, so the summed
    squared error becomes Σ e² + 2 η δ_c (K e)_c + (η δ_c)² Σ_j K_cj², over one representative
    per pair at once. With function approximation it can reach a θ where no single update
    lowers the loss, and θ stops moving for good: that run is STALLED.
    """
    memory = learner.memory
    _, representatives = np.unique(memory.pair, return_index=True)
    features = learner.features()
    kernel = features[memory.pair[representatives]] @ features.T
    spread = (kernel**2).sum(axis=1)
    for made in range(1, settings.max_updates + 1):
        errors = learner.q_values() - learner.q_true
        steps = learner.step_size * learner.td_errors(representatives)
        loss = errors @ errors
        loss_after = loss + 2 * steps * (kernel @ errors) + steps**2 * spread
        best = int(np.argmin(loss_after))
        if loss - loss_after[best] <= STALL_FRACTION * loss:
            return Outcome(made - 1, STALLED)
        _, mse = learner.update(int(representatives[best]))
        if mse < settings.tolerance:
            return Outcome(made, CONVERGED)
    return Outcome(settings.max_updates, CAPPED)


class GreedyQueue:
    """Greedy TD-error prioritization (Section 3.2): the transition with the largest last-seen
    |δ|, from a heap of (−|δ|, index). Unseen ones are at +∞, so each is replayed once, in
    memory order, before any is revisited; only the top entry changes, so none is stale."""

    def __init__(self, size: int):
        self._heap = [(-math.inf, index) for index in range(size)]  # sorted, hence a heap

    def choose(self) -> int:
        return self._heap[0][1]

    def observe(self, index: int, td_error: float) -> None:
        heapq.heapreplace(self._heap, (-abs(td_error), index))


class LearningProgress:
    """Raw priorities (before α) from a measure of expected learning progress (Appendix A; the
    method's patent names the same three): |δ| at the last replay, its change between the last
    two replays, or the norm of the parameter change (`replay.priority_signals`'s formulas).
    `priorities[s]` is the signal's at slot s's last replay, or the `max_priority` when it was
    filled (Algorithm 1); `max_priority`, at least 1, is the largest computed, as a sampler's fed
    these priorities; `_previous[s]` is slot s's δ at its last replay, NaN if none since it was
    filled.

    Here ‖Δθ‖ = η |δ| ‖φ‖ with one ‖φ‖ per representation, so it orders transitions as |δ| does
    and differs from |δ| + ε in scale only: ε is added after the scaling, and a new transition
    enters at the largest raw priority so far, at least 1, while a replayed one gets at most
    about η‖φ‖.
    """

    def __init__(self, signal: str, learner: QLearner, priority_epsilon: float):
        self._signal = signal_named(signal)  # also rejects an unknown signal
        self._learner = learner
        self._priority_epsilon = priority_epsilon
        size = len(learner.memory)
        self.max_priority = 1.0
        self.priorities = np.full(size, self.max_priority)
        self._previous = np.full(size, np.nan)

    def observe(self, index: int, td_error: float) -> float:
        """The new raw priority of slot `index`, replayed with δ `td_error` (before its update)."""
        indices, td_errors = np.array([index]), np.array([td_error])
        reads_norms = self._signal.reads_parameter_change_norms
        norms = self._learner.parameter_change_norms(indices, td_errors) if reads_norms else None
        inputs = SignalInputs(td_errors, self._previous[indices], norms)
        clip = 1.0  # of |δ|, the agent's default td_error_clip
        priority = float(self._signal.priorities(inputs, self._priority_epsilon, clip)[0])
        self._previous[index] = td_error
        self.priorities[index] = priority
        self.max_priority = max(self.max_priority, priority)
        return priority

    def refill(self, index: int) -> None:
        """Slot `index` now holds a new transition: never replayed, at the largest priority."""
        self._previous[index] = np.nan
        self.priorities[index] = self.max_priority


class SamplerChoice:
    """One transition at a time from a project sampler, its priority updated after each
    update. The rank-based sampler's segments are the batch, so `sample(1)` would be uniform:
    it is asked for `draws` = k stratified draws, one of which, chosen uniformly, is replayed.
    """

    def __init__(
        self,
        sampler,
        rng: np.random.Generator,
        progress: LearningProgress,
        draws: int = 1,
        resort_updates: int | None = None,
    ):
        self._sampler, self._rng, self._draws = sampler, rng, draws
        self._progress = progress
        self._resort_updates, self._updates = resort_updates, 0

    def choose(self) -> int:
        indices, _ = self._sampler.sample(self._draws)
        return int(indices[0] if self._draws == 1 else indices[self._rng.integers(self._draws)])

    def observe(self, index: int, td_error: float) -> None:
        priority = self._progress.observe(index, td_error)
        self._sampler.update(np.array([index]), np.array([priority]))
        self._updates += 1
        if self._resort_updates and self._updates % self._resort_updates == 0:
            self._sampler.resort()


def replay_greedy(learner: QLearner, rng: np.random.Generator, settings: ReplaySettings):
    return replay_one_at_a_time(learner, GreedyQueue(len(learner.memory)), settings)


def replay_proportional(
    learner: QLearner, rng: np.random.Generator, settings: ReplaySettings, signal: str = "td_error"
):
    size = len(learner.memory)
    sampler = ProportionalSampler(size, rng, priority_exponent=settings.proportional_exponent)
    progress = LearningProgress(signal, learner, settings.priority_epsilon)
    choice = SamplerChoice(_filled(sampler, size), rng, progress)
    return replay_one_at_a_time(learner, choice, settings)


def replay_rank_based(
    learner: QLearner, rng: np.random.Generator, settings: ReplaySettings, signal: str = "td_error"
):
    size = len(learner.memory)
    sampler_rng, choice_rng = rng.spawn(2)
    sampler = RankBasedSampler(size, sampler_rng, priority_exponent=settings.rank_exponent)
    progress = LearningProgress(signal, learner, settings.priority_epsilon)
    choice = SamplerChoice(
        _filled(sampler, size),
        choice_rng,
        progress,
        draws=settings.rank_segments,
        resort_updates=size,
    )
    return replay_one_at_a_time(learner, choice, settings)


def _filled(sampler, size: int):
    for index in range(size):
        sampler.add(index)
    return sampler


def replay_one_at_a_time(learner: QLearner, strategy, settings: ReplaySettings) -> Outcome:
    """choose → update → observe(δ before the update, as Algorithm 1) → converged?"""
    for made in range(1, settings.max_updates + 1):
        index = strategy.choose()
        td_error, mse = learner.update(index)
        strategy.observe(index, td_error)
        if mse < settings.tolerance:
            return Outcome(made, CONVERGED)
    return Outcome(settings.max_updates, CAPPED)


STRATEGIES: dict[str, Callable[[QLearner, np.random.Generator, ReplaySettings], Outcome]] = {
    "uniform": replay_uniform,
    "oracle": replay_oracle,
    "greedy": replay_greedy,
    "proportional": replay_proportional,
    "rank_based": replay_rank_based,
}
# Each stochastic sampler under each measure of learning progress compared here, the paper's |δ|
# and its patent's two: the plain name is |δ|, and "SAMPLER:SIGNAL" another signal of
# `replay.priority_signals`.
SIGNAL_STRATEGIES: dict[str, tuple[str, ...]] = {
    sampler: (sampler, f"{sampler}:td_error_change", f"{sampler}:parameter_change")
    for sampler in ("proportional", "rank_based")
}
STRATEGIES.update(
    {
        strategy: partial(STRATEGIES[sampler], signal=strategy.partition(":")[2])
        for sampler, strategies in SIGNAL_STRATEGIES.items()
        for strategy in strategies[1:]
    }
)
