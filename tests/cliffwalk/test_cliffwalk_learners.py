"""Q-learning updates (Appendix B.1, Equations 2 and 3), tabular and linear."""

import numpy as np
import pytest

from cliffwalk.learners import QLearner, exhaustive_transitions, true_q_values


def learner(n: int, has_bias: bool, seed: int = 0) -> QLearner:
    memory = exhaustive_transitions(n, np.random.default_rng(seed))
    return QLearner(memory, has_bias=has_bias, rng=np.random.default_rng(seed))


def index_of(memory, pair: int) -> int:
    return int(np.flatnonzero(memory.pair == pair)[0])


def test_tabular_update_by_hand():
    q = learner(3, has_bias=False)
    q.theta[:] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    # State 0, right action 0 -> state 1, whose best Q is 0.4: δ = 0 + (2/3)·0.4 − 0.1.
    delta, _ = q.update(index_of(q.memory, pair=0))
    assert delta == pytest.approx(2 / 3 * 0.4 - 0.1)
    np.testing.assert_allclose(q.theta, [0.1 + 0.25 * delta, 0.2, 0.3, 0.4, 0.5, 0.6])
    # State 2, right action 0: the reward, terminal: δ = 1 − 0.5.
    delta, _ = q.update(index_of(q.memory, pair=4))
    assert delta == pytest.approx(0.5)
    assert q.theta[4] == pytest.approx(0.5 + 0.25 * 0.5)


def test_linear_update_moves_the_pair_weight_and_its_action_bias():
    q = learner(2, has_bias=True)
    q.theta[:] = [0.1, 0.2, 0.3, 0.4, 0.05, -0.05]  # pair weights, then b_0, b_1
    np.testing.assert_allclose(q.q_values(), [0.15, 0.15, 0.35, 0.35])
    # State 0, right action 0 -> state 1 (max Q 0.35), γ = 1/2: δ = 0.175 − 0.15.
    delta, mse = q.update(index_of(q.memory, pair=0))
    assert delta == pytest.approx(0.025)
    expected = [0.1 + delta / 4, 0.2, 0.3, 0.4, 0.05 + delta / 4, -0.05]
    np.testing.assert_allclose(q.theta, expected)
    assert mse == pytest.approx(np.mean((q.q_values() - true_q_values(2)) ** 2))


@pytest.mark.parametrize("has_bias", [False, True])
def test_vectorized_td_errors_equal_the_update_deltas(has_bias):
    q = learner(5, has_bias)
    for index in np.random.default_rng(3).integers(0, len(q.memory), 50):
        expected = q.td_errors(np.array([index]))[0]
        delta, _ = q.update(int(index))
        assert delta == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("has_bias", [False, True])
def test_compiled_replay_sequence_equals_single_updates(has_bias):
    one, many = learner(6, has_bias), learner(6, has_bias)
    indices = np.random.default_rng(1).integers(0, len(one.memory), 300)
    for index in indices:
        one.update(int(index))
    assert many.replay_sequence(indices, tolerance=0.0) is None  # never converges at 0
    np.testing.assert_allclose(many.theta, one.theta, rtol=0, atol=1e-15)
    assert many.max_abs_td_error == one.max_abs_td_error


def test_replay_sequence_stops_at_the_first_update_below_the_tolerance():
    q = learner(3, has_bias=False)
    indices = np.random.default_rng(2).integers(0, len(q.memory), 100_000)
    made = q.replay_sequence(indices)
    assert made is not None and q.mse() < 1e-3
    check = learner(3, has_bias=False)
    for index in indices[: made - 1]:
        check.update(int(index))
    assert check.mse() >= 1e-3


def test_td_errors_stay_within_one_from_a_zero_start():
    """Why the samplers' clip of |δ| to 1 does not bite: from Q = 0 tabular Q-values stay in
    [0, 1] (convex steps towards targets in [0, 1]), so every δ is in [−1, 1]. Only the random
    initialization N(0, 0.1) can push the first few |δ| slightly above 1 (reported per run)."""
    q = learner(6, has_bias=False)
    q.theta[:] = 0.0
    indices = np.random.default_rng(0).integers(0, len(q.memory), 20_000)
    q.replay_sequence(indices, tolerance=0.0)
    assert q.max_abs_td_error <= 1.0 and q.td_errors_above_one == 0
    assert q.q_values().min() >= 0.0 and q.q_values().max() <= 1.0


@pytest.mark.parametrize("has_bias", [False, True])
def test_uniform_replay_learns_the_true_values(has_bias):
    q = learner(4, has_bias)
    indices = np.random.default_rng(0).integers(0, len(q.memory), 200_000)
    assert q.replay_sequence(indices, tolerance=1e-8) is not None
    np.testing.assert_allclose(q.q_values(), true_q_values(4), atol=3e-4)


@pytest.mark.parametrize(
    ("has_bias", "n", "theta", "pair", "expected_delta", "expected_norm"),
    [
        # n = 3, γ = 2/3, state 0, right action 0 -> state 1 (best Q 0.4): δ = 1/6, and only
        # the pair's weight moves, by η δ = 1/24.
        (False, 3, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 0, 1 / 6, 1 / 24),
        # n = 2, γ = 1/2, Q = w + b: δ = 0.175 − 0.15 = 0.025 moves the pair weight and the
        # action bias by η δ each: ‖Δθ‖ = √2 · 0.00625.
        (True, 2, [0.1, 0.2, 0.3, 0.4, 0.05, -0.05], 0, 0.025, 2**0.5 * 0.00625),
    ],
)
def test_parameter_change_norm_by_hand(has_bias, n, theta, pair, expected_delta, expected_norm):
    q = learner(n, has_bias)
    q.theta[:] = theta
    index = index_of(q.memory, pair)
    before = q.theta.copy()
    delta, _ = q.update(index)
    assert delta == pytest.approx(expected_delta, rel=1e-12)
    assert np.linalg.norm(q.theta - before) == pytest.approx(expected_norm, rel=1e-12)
    norms = q.parameter_change_norms(np.array([index]), np.array([delta]))
    np.testing.assert_allclose(norms, [expected_norm], rtol=1e-12)
