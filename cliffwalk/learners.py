"""Q-learning on Blind Cliffwalk transitions, tabular or with linear function approximation
(Schaul et al. 2016, Appendix B.1, Equations 2 and 3).

Q(s, a) = θᵀφ(s, a). Tabular: φ is the one-hot vector of the pair 2 s + a. Linear: the state is
encoded as a one-hot vector followed by a constant bias feature 1, and each action has its own
weights over it, Q(s, a) = w_a[s] + b_a (θ = the 2n pair weights, then b_0, b_1). The per-action
bias is what makes the paper's alternation of the 'right' action matter: a bias shared by all
pairs could not tell actions apart anyway, whereas b_a could learn "action a is right" if the
right action never alternated (Appendix B.1, Figure 1's caption).

One update on transition (S, A, R, S'):
δ = R + γ' max_a Q(S', a) − Q(S, A), with γ' = γ unless the transition is terminal (then 0),
and θ ← θ + η δ φ(S, A). The per-update kernels are compiled with numba because a run makes
up to millions of single updates and the interpreter would otherwise dominate.
"""

import numpy as np
from numba import njit

from cliffwalk.env import Transitions, discount, true_q_values

STEP_SIZE = 0.25  # η = 1/4 for every n (App. B.1)
INIT_STD = 0.1  # θ_i ~ N(0, 0.1), read as standard deviation 0.1
TOLERANCE = 1e-3  # converged once the MSE to the true Q-values is below this


@njit(cache=True)
def _q(theta, has_bias, pair):
    """Q of one pair: its own weight, plus the bias weight of its action (the last two)."""
    value = theta[pair]
    if has_bias:
        value += theta[theta.shape[0] - 2 + pair % 2]
    return value


@njit(cache=True)
def _update(theta, has_bias, pair, next_state, reward, terminal, gamma, step_size, index):
    """Applies one Q-learning update in place and returns its δ (computed before the update)."""
    target = reward[index]
    if not terminal[index]:
        following = 2 * next_state[index]
        target += gamma * max(_q(theta, has_bias, following), _q(theta, has_bias, following + 1))
    delta = target - _q(theta, has_bias, pair[index])
    theta[pair[index]] += step_size * delta
    if has_bias:
        theta[theta.shape[0] - 2 + pair[index] % 2] += step_size * delta
    return delta


@njit(cache=True)
def _mse(theta, has_bias, q_true):
    total = 0.0
    for pair in range(q_true.shape[0]):
        total += (_q(theta, has_bias, pair) - q_true[pair]) ** 2
    return total / q_true.shape[0]


@njit(cache=True)
def _replay_sequence(
    theta,
    has_bias,
    pair,
    next_state,
    reward,
    terminal,
    gamma,
    step_size,
    q_true,
    indices,
    tolerance,
):
    """Updates on `indices` in order until the MSE drops below `tolerance`.

    Returns (updates made, whether converged, largest |δ|, number of |δ| > 1).
    """
    largest, above_one = 0.0, 0
    for k in range(indices.shape[0]):
        delta = _update(
            theta, has_bias, pair, next_state, reward, terminal, gamma, step_size, indices[k]
        )
        largest = max(largest, abs(delta))
        if abs(delta) > 1.0:
            above_one += 1
        if _mse(theta, has_bias, q_true) < tolerance:
            return k + 1, True, largest, above_one
    return indices.shape[0], False, largest, above_one


class QLearner:
    """Q-learning with one-hot features, optionally plus per-action bias weights, on a memory.

    Invariants: `theta` has 2n entries (one per pair) and, when `has_bias`, the biases of
    actions 0 and 1 after them; `feature_norms[pair]` is ‖φ(pair)‖ (1 tabular, √2 linear);
    `max_abs_td_error` and `td_errors_above_one` cover every update made so far, so a caller can
    report whether the samplers' clip of |δ| to 1 ever mattered.
    """

    def __init__(
        self,
        memory: Transitions,
        *,
        has_bias: bool,
        rng: np.random.Generator,
        step_size: float = STEP_SIZE,
        init_std: float = INIT_STD,
    ):
        self.memory = memory
        self.has_bias = has_bias
        self.gamma = discount(memory.n)
        self.step_size = step_size
        self.q_true = true_q_values(memory.n)
        self.theta = rng.normal(0.0, init_std, size=2 * memory.n + 2 * int(has_bias))
        self.feature_norms = np.linalg.norm(self.features(), axis=1)
        self.max_abs_td_error = 0.0
        self.td_errors_above_one = 0

    def features(self) -> np.ndarray:
        """φ of every pair as rows (2n × len(theta)): the identity, plus (linear) a one in the
        column of the pair's action bias."""
        pairs = 2 * self.memory.n
        features = np.zeros((pairs, self.theta.shape[0]))
        features[np.arange(pairs), np.arange(pairs)] = 1.0
        if self.has_bias:
            features[np.arange(pairs), pairs + np.arange(pairs) % 2] = 1.0
        return features

    def q_values(self) -> np.ndarray:
        """Q(s, a) of every pair 2 s + a."""
        return self.features() @ self.theta

    def mse(self) -> float:
        """Mean over the 2n state-action pairs of (Q − Q*)²."""
        return float(_mse(self.theta, self.has_bias, self.q_true))

    def td_errors(self, indices: np.ndarray) -> np.ndarray:
        """δ of the given memory transitions under the current θ, without updating."""
        m = self.memory
        q = self.q_values().reshape(-1, 2)
        bootstrap = np.where(m.terminal[indices], 0.0, self.gamma * q[m.next_state[indices]].max(1))
        return m.reward[indices] + bootstrap - q.reshape(-1)[m.pair[indices]]

    def parameter_change_norms(self, indices: np.ndarray, td_errors: np.ndarray) -> np.ndarray:
        """‖Δθ‖ of the updates with these δ on these memory transitions.

        Δθ = η δ φ(S, A) (Equation 3), so ‖Δθ‖ = η |δ| ‖φ(S, A)‖: a fixed multiple of |δ| per
        pair, and the same multiple for every pair of a representation, since ‖φ‖ does not
        depend on the pair.
        """
        return self.step_size * np.abs(td_errors) * self.feature_norms[self.memory.pair[indices]]

    def update(self, index: int) -> tuple[float, float]:
        """One Q-learning update on memory transition `index`: returns (δ, MSE afterwards)."""
        delta = _update(*self._update_arguments(), index)
        self._record(abs(delta), int(abs(delta) > 1.0))
        return delta, _mse(self.theta, self.has_bias, self.q_true)

    def replay_sequence(self, indices: np.ndarray, tolerance: float = TOLERANCE) -> int | None:
        """Updates on `indices` in order, stopping as soon as the MSE is below `tolerance`.

        Returns the number of updates made if it converged, None if it used them all.
        """
        made, converged, largest, above_one = _replay_sequence(
            *self._update_arguments(),
            self.q_true,
            np.ascontiguousarray(indices, dtype=np.int64),
            tolerance,
        )
        self._record(largest, above_one)
        return made if converged else None

    def _update_arguments(self) -> tuple:
        """What the compiled update kernels read, in their argument order."""
        m = self.memory
        return (
            self.theta, self.has_bias, m.pair, m.next_state, m.reward, m.terminal,
            self.gamma, self.step_size,
        )  # fmt: skip

    def _record(self, abs_delta: float, above_one: int) -> None:
        self.max_abs_td_error = max(self.max_abs_td_error, float(abs_delta))
        self.td_errors_above_one += int(above_one)
