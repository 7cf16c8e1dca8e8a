"""The Blind Cliffwalk: memory contents, its size 2^(n+1) − 2, and the true Q-values."""

import numpy as np
import pytest

from cliffwalk.learners import (
    QLearner,
    discount,
    episode_of,
    exhaustive_transitions,
    memory_size,
    right_action,
    true_q_values,
)


def test_episodes_stop_at_the_first_wrong_action():
    # n = 3: right actions are 0, 1, 0.
    assert episode_of(3, np.array([1, 1, 1])) == [(0, 1, 0, 0.0, True)]
    assert episode_of(3, np.array([0, 0, 1])) == [(0, 0, 1, 0.0, False), (1, 0, 0, 0.0, True)]
    assert episode_of(3, np.array([0, 1, 0])) == [
        (0, 0, 1, 0.0, False),
        (1, 1, 2, 0.0, False),
        (2, 0, 0, 1.0, True),
    ]


@pytest.mark.parametrize("n", range(1, 11))
def test_exhaustive_fill_has_the_papers_count_and_one_success(n):
    memory = exhaustive_transitions(n, np.random.default_rng(n))
    assert len(memory) == memory_size(n) == 2 ** (n + 1) - 2
    assert memory.reward.sum() == 1.0
    rewarded = np.flatnonzero(memory.reward)
    assert memory.pair[rewarded] == 2 * (n - 1) + right_action(n - 1)
    assert memory.terminal[rewarded]


@pytest.mark.parametrize("n", [2, 5, 9])
def test_each_pair_appears_as_often_as_a_random_policy_meets_it(n):
    memory = exhaustive_transitions(n, np.random.default_rng(0))
    counts = np.bincount(memory.pair, minlength=2 * n).reshape(n, 2)
    expected = 2.0 ** (n - 1 - np.arange(n))
    np.testing.assert_array_equal(counts, np.stack([expected, expected], axis=1))


def test_fill_order_is_random_but_seeded():
    first = exhaustive_transitions(6, np.random.default_rng(1)).pair
    assert np.array_equal(first, exhaustive_transitions(6, np.random.default_rng(1)).pair)
    assert not np.array_equal(first, exhaustive_transitions(6, np.random.default_rng(2)).pair)


def test_true_q_values_by_hand():
    # n = 2, γ = 1/2: right is 0 in state 0 and 1 in state 1; pairs are (s0a0, s0a1, s1a0, s1a1).
    np.testing.assert_allclose(true_q_values(2), [0.5, 0.0, 0.0, 1.0])
    # n = 3, γ = 2/3: right actions 0, 1, 0.
    np.testing.assert_allclose(true_q_values(3), [4 / 9, 0.0, 0.0, 2 / 3, 1.0, 0.0])
    assert discount(3) == pytest.approx(2 / 3)


@pytest.mark.parametrize("n", [2, 3, 7])
def test_true_q_values_have_zero_td_error_on_every_transition(n):
    memory = exhaustive_transitions(n, np.random.default_rng(0))
    learner = QLearner(memory, has_bias=False, rng=np.random.default_rng(0))
    learner.theta[:] = true_q_values(n)
    np.testing.assert_allclose(learner.td_errors(np.arange(len(memory))), 0.0, atol=1e-15)
