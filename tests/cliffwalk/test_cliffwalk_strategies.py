"""Replay strategies: the oracle's closed form, the greedy queue, convergence, and the
paper's qualitative result at small n (prioritized and oracle need fewer updates)."""

import copy

import numpy as np
import pytest

from cliffwalk.experiment import run_one
from cliffwalk.learners import QLearner, exhaustive_transitions
from cliffwalk.strategies import (
    CONVERGED,
    STALLED,
    STRATEGIES,
    GreedyQueue,
    ReplaySettings,
    replay_oracle,
)

SEEDS = range(5)


def learner(n: int, has_bias: bool, seed: int = 0) -> QLearner:
    memory = exhaustive_transitions(n, np.random.default_rng(seed))
    return QLearner(memory, has_bias=has_bias, rng=np.random.default_rng(seed + 100))


@pytest.mark.parametrize("has_bias", [False, True])
def test_oracle_picks_the_update_with_the_smallest_loss_afterwards(has_bias):
    """Brute force: try every memory transition on a copy and measure the MSE after it."""
    q = learner(4, has_bias)
    for _ in range(5):
        losses = []
        for index in range(len(q.memory)):
            trial = copy.deepcopy(q)
            losses.append(trial.update(index)[1])
        best_loss = min(losses)
        replay_oracle(q, None, ReplaySettings(max_updates=1, tolerance=0.0))
        assert q.mse() == pytest.approx(best_loss, rel=1e-12)


def test_greedy_queue_replays_everything_once_then_the_largest_error():
    queue = GreedyQueue(4)
    seen = []
    for td_error in [0.1, -0.7, 0.3, 0.2]:
        seen.append(queue.choose())
        queue.observe(seen[-1], td_error)
    assert seen == [0, 1, 2, 3]
    assert queue.choose() == 1  # |−0.7| is the largest
    queue.observe(1, 0.05)
    assert queue.choose() == 2


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("representation", ["tabular", "linear"])
def test_every_strategy_converges_at_small_n(representation, strategy):
    result = run_one(f"{representation}/{strategy}", 4, seed=0, settings=ReplaySettings())
    assert result.status == CONVERGED and result.final_mse < 1e-3
    assert result.transitions == 30


def median_updates(variant: str, n: int) -> float:
    results = [run_one(variant, n, seed, ReplaySettings()) for seed in SEEDS]
    assert all(result.status == CONVERGED for result in results)
    return float(np.median([result.updates for result in results]))


def test_tabular_ordering_oracle_greedy_uniform():
    """Figures 1 and 2 (left) at n = 6: oracle < greedy TD-error < uniform."""
    uniform = median_updates("tabular/uniform", 6)
    greedy = median_updates("tabular/greedy", 6)
    oracle = median_updates("tabular/oracle", 6)
    assert oracle < greedy < uniform
    assert uniform > 4 * greedy


@pytest.mark.parametrize("representation", ["tabular", "linear"])
def test_stochastic_prioritization_beats_uniform(representation):
    """Figure 2 (right) at n = 6: both rank-based and proportional beat uniform."""
    uniform = median_updates(f"{representation}/uniform", 6)
    assert median_updates(f"{representation}/proportional", 6) < uniform / 1.5
    assert median_updates(f"{representation}/rank_based", 6) < uniform / 1.5


def test_gap_to_uniform_grows_with_n():
    ratios = [
        median_updates("tabular/uniform", n) / median_updates("tabular/greedy", n) for n in (3, 6)
    ]
    assert ratios[1] > ratios[0]


def test_linear_oracle_stalls_where_no_single_update_lowers_the_loss():
    q = learner(8, has_bias=True, seed=0)
    outcome = replay_oracle(q, None, ReplaySettings(max_updates=100_000))
    assert outcome.status == STALLED and q.mse() > 1e-3
    for index in range(len(q.memory)):
        trial = copy.deepcopy(q)
        assert trial.update(index)[1] >= q.mse() * (1 - 1e-9)


def test_runs_hitting_the_cap_are_reported_as_capped():
    result = run_one("tabular/uniform", 6, seed=0, settings=ReplaySettings(max_updates=10))
    assert (result.status, result.updates) == ("capped", 10)
