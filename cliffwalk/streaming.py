"""The Blind Cliffwalk with a streaming replay memory smaller than the experience it sees:
which transitions to forget (the method's patent: "use the expected learning progress to decide
when to delete experience"), under uniform and prioritized sampling.

The stream plays uniformly random action sequences from the start state, forever, so each pair
arrives at the rate of the paper's memory. Each arriving transition is stored (evicting one when
full), then `replay_ratio` updates are replayed. A run counts the updates from the first
rewarded transition's arrival: the wait before it is the same for every variant of a seed
(`updates_before_reward`) and would only add noise.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from cliffwalk.experiment import REPRESENTATIONS, Panel, RunResult, Study, parse_variant
from cliffwalk.learners import QLearner, Transitions, episode_of, memory_size
from cliffwalk.strategies import (
    CONVERGED,
    LearningProgress,
    ReplaySettings,
    SamplerChoice,
    replay_one_at_a_time,
)
from replay.proportional import ProportionalSampler
from replay.sampler import UniformSampler

EVICTIONS = ("fifo", "lowest_priority")
SAMPLERS = {
    "uniform": lambda capacity, rng, settings: UniformSampler(capacity, rng),
    "proportional": lambda capacity, rng, settings: ProportionalSampler(
        capacity, rng, priority_exponent=settings.proportional_exponent
    ),
}
STREAM_STRATEGIES = tuple(f"{sampler}+{eviction}" for sampler in SAMPLERS for eviction in EVICTIONS)


@dataclass(frozen=True)
class StreamResult(RunResult):
    """A row of streaming.csv: `transitions` is the capacity, `updates` counts from the first
    reward's arrival, `updates_before_reward` the wait (the whole run if it never came)."""

    updates_before_reward: int


def memory_capacity(n: int, memory_fraction: float) -> int:
    return max(1, int(memory_fraction * memory_size(n)))


def random_episodes(n: int, rng: np.random.Generator) -> Iterator[tuple]:
    """(state, action, next_state, reward, terminal) of an endless stream of episodes."""
    while True:
        yield from episode_of(n, rng.integers(0, 2, size=n))


def evicted_slot(eviction: str, arrival: np.ndarray, priorities: np.ndarray) -> int:
    """The slot a full memory gives up: the oldest, or the oldest of the lowest priority."""
    if eviction == "fifo":
        return int(np.argmin(arrival))
    lowest = np.flatnonzero(priorities == priorities.min())
    return int(lowest[np.argmin(arrival[lowest])])


def run_streaming(variant: str, n: int, seed: int, settings: ReplaySettings) -> StreamResult:
    """One run, seeded as `run_one` with the stream in place of the memory order; its
    priorities are |δ| + ε."""
    representation, strategy = parse_variant(variant, STREAM_STRATEGIES)
    sampler_name, _, eviction = strategy.partition("+")
    stream_seed, theta_seed, replay_seed = np.random.SeedSequence([seed, n]).spawn(3)
    capacity, budget = memory_capacity(n, settings.memory_fraction), settings.max_updates
    columns = (np.zeros(capacity, dtype) for dtype in (np.int64, np.int64, np.float64, bool))
    memory = Transitions(n, *columns)
    learner = QLearner(
        memory, has_bias=representation == "linear", rng=np.random.default_rng(theta_seed)
    )
    replay_rng = np.random.default_rng(replay_seed)
    sampler = SAMPLERS[sampler_name](capacity, replay_rng, settings)
    progress = LearningProgress("td_error", learner, settings.priority_epsilon)
    choice = SamplerChoice(sampler, replay_rng, progress)
    arrival = np.zeros(capacity, dtype=np.int64)
    made, before_reward = 0, None
    start = time.perf_counter()
    stream = random_episodes(n, np.random.default_rng(stream_seed))
    for position, (state, action, next_state, reward, terminal) in enumerate(stream):
        if made >= budget:
            break
        if position < capacity:
            slot = position
        else:
            slot = evicted_slot(eviction, arrival, progress.priorities)
            sampler.remove(slot)
        memory.pair[slot], memory.next_state[slot] = 2 * state + action, next_state
        memory.reward[slot], memory.terminal[slot] = reward, terminal
        arrival[slot] = position
        progress.refill(slot)
        sampler.add(slot)
        if before_reward is None and memory.reward[slot]:
            before_reward = made
        block = replace(settings, max_updates=min(settings.replay_ratio, budget - made))
        outcome = replay_one_at_a_time(learner, choice, block)
        made += outcome.updates
        if outcome.status == CONVERGED:
            break
    before_reward = made if before_reward is None else before_reward
    return StreamResult(
        representation=representation,
        strategy=strategy,
        n=n,
        transitions=capacity,
        seed=seed,
        updates=made - before_reward,
        status=outcome.status,  # the last block's: converged, or capped by the budget
        final_mse=learner.mse(),
        max_abs_td_error=learner.max_abs_td_error,
        td_errors_above_one=learner.td_errors_above_one,
        seconds=round(time.perf_counter() - start, 4),
        updates_before_reward=before_reward,
    )


STREAMING = Study(
    name="streaming",
    run=run_streaming,
    strategies=STREAM_STRATEGIES,
    panels={
        f"streaming_{representation}": Panel(
            representation,
            STREAM_STRATEGIES,
            f"Streaming memory, {representation}: forgetting and sampling",
        )
        for representation in REPRESENTATIONS
    },
    result=StreamResult,
    memory="replay memory capacity (a fraction of 2^(n+1) − 2)",
    memory_column="capacity",
    updates="updates from the first reward until MSE < 10⁻³",
    paired_title="Forgetting the lowest priority instead of the oldest",
    comparisons={
        f"{sampler}: A = forget oldest, B = forget lowest |δ|": tuple(
            f"{sampler}+{eviction}" for eviction in EVICTIONS
        )
        for sampler in SAMPLERS
    },
)
