"""The Blind Cliffwalk with a streaming replay memory smaller than the experience it sees:
which transitions to forget (the method's patent: "use the expected learning progress to
decide when to delete experience"), under uniform and prioritized sampling.

The stream is what the paper's exhaustive fill enumerates, drawn at random instead: each
episode plays a uniformly random action sequence of length n from the start state until it
terminates (`cliffwalk.env.episode_of`), the next episode starts again at state 0, forever.
Pair (s, a) therefore arrives at the same expected rate as in the paper's memory, and the
rewarded transition once every 2^n episodes on average. Each arriving transition is stored
(evicting one when the memory is full), then `replay_ratio` Q-learning updates are replayed
from the memory, until the MSE to Q* is below the tolerance.

A run counts the updates from the arrival of the first rewarded transition until
convergence. Before it, no strategy can converge (Q* is not 0) and the wait does not depend
on the strategy: with common random numbers every variant of a seed sees the same stream, so
the wait (`updates_before_reward`, in the csv) is the same for all of them and only adds noise
to the comparison.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from cliffwalk.env import Transitions, episode_of, memory_size
from cliffwalk.experiment import (
    REPRESENTATIONS,
    Panel,
    RunResult,
    Study,
    paired_table,
    parse_variant,
)
from cliffwalk.learners import QLearner
from cliffwalk.progress import LearningProgress
from cliffwalk.strategies import (
    CAPPED,
    CONVERGED,
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
class StreamSettings:
    """`memory_fraction` of the paper's memory size 2^(n+1) − 2 is the capacity (at least 1);
    `replay_ratio` updates are replayed per arriving transition (8: DQN replays each
    transition 8 times on average, Section 4). Priorities, for sampling and for eviction, are
    |δ| + ε at the last replay (`replay.priority_signals.td_error_priorities`)."""

    replay: ReplaySettings = ReplaySettings()
    memory_fraction: float = 0.25
    replay_ratio: int = 8


@dataclass(frozen=True)
class StreamResult(RunResult):
    """One row of streaming.csv: `transitions` is the memory's capacity and `updates` counts
    from the first rewarded transition's arrival; `updates_before_reward` is the wait for it
    (the whole run, with `updates` 0, if it never came)."""

    updates_before_reward: int


def memory_capacity(n: int, memory_fraction: float) -> int:
    return max(1, int(memory_fraction * memory_size(n)))


def random_episodes(n: int, rng: np.random.Generator) -> Iterator[tuple]:
    """(state, action, next_state, reward, terminal) of an endless stream of episodes."""
    while True:
        yield from episode_of(n, rng.integers(0, 2, size=n))


def evicted_slot(eviction: str, arrival: np.ndarray, priorities: np.ndarray) -> int:
    """The slot a full memory gives up for the next transition: the oldest ("fifo"), or the
    one with the lowest raw priority, the oldest of those on a tie ("lowest_priority").
    `arrival[s]` is the stream position of slot s's transition, `priorities[s]` its priority."""
    if eviction == "fifo":
        return int(np.argmin(arrival))
    lowest = np.flatnonzero(priorities == priorities.min())
    return int(lowest[np.argmin(arrival[lowest])])


def _empty_memory(n: int, capacity: int) -> Transitions:
    return Transitions(
        n=n,
        pair=np.zeros(capacity, dtype=np.int64),
        next_state=np.zeros(capacity, dtype=np.int64),
        reward=np.zeros(capacity),
        terminal=np.zeros(capacity, dtype=bool),
    )


def _store(
    memory: Transitions,
    slot: int,
    state: int,
    action: int,
    next_state: int,
    reward: float,
    terminal: bool,
) -> None:
    memory.pair[slot], memory.next_state[slot] = 2 * state + action, next_state
    memory.reward[slot], memory.terminal[slot] = reward, terminal


def run_streaming(variant: str, n: int, seed: int, settings: StreamSettings) -> StreamResult:
    """One run: stream, store (evicting when full), replay, until converged or capped.

    Seeds as `cliffwalk.experiment.run_one`: the first child of SeedSequence([seed, n]) drives
    the stream instead of the memory order, the second the initial θ (the same θ as there),
    the third the replay.
    """
    representation, strategy = parse_variant(variant, STREAM_STRATEGIES)
    sampler_name, _, eviction = strategy.partition("+")
    stream_seed, theta_seed, replay_seed = np.random.SeedSequence([seed, n]).spawn(3)
    capacity, budget = memory_capacity(n, settings.memory_fraction), settings.replay.max_updates
    memory = _empty_memory(n, capacity)
    learner = QLearner(
        memory, has_bias=representation == "linear", rng=np.random.default_rng(theta_seed)
    )
    replay_rng = np.random.default_rng(replay_seed)
    sampler = SAMPLERS[sampler_name](capacity, replay_rng, settings.replay)
    progress = LearningProgress("td_error", learner, settings.replay.priority_epsilon)
    choice = SamplerChoice(sampler, replay_rng, progress)
    arrival = np.zeros(capacity, dtype=np.int64)
    made, before_reward, status = 0, None, CAPPED
    start = time.perf_counter()
    for position, step in enumerate(random_episodes(n, np.random.default_rng(stream_seed))):
        if made >= budget:
            break
        if position < capacity:
            slot = position
        else:
            slot = evicted_slot(eviction, arrival, progress.priorities)
            sampler.remove(slot)
        _store(memory, slot, *step)
        arrival[slot] = position
        progress.refill(slot)
        sampler.add(slot)
        if before_reward is None and memory.reward[slot]:
            before_reward = made
        block = replace(settings.replay, max_updates=min(settings.replay_ratio, budget - made))
        outcome = replay_one_at_a_time(learner, choice, block)
        made += outcome.updates
        if outcome.converged:
            status = CONVERGED
            break
    before_reward = made if before_reward is None else before_reward
    return StreamResult(
        representation=representation,
        strategy=strategy,
        n=n,
        transitions=capacity,
        seed=seed,
        updates=made - before_reward,
        status=status,
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
    paired=partial(
        paired_table,
        title="Forgetting the lowest priority instead of the oldest",
        comparisons={
            f"{sampler}: A = forget oldest, B = forget lowest |δ|": (
                f"{sampler}+fifo",
                f"{sampler}+lowest_priority",
            )
            for sampler in SAMPLERS
        },
    ),
)
