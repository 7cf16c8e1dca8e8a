"""The Blind Cliffwalk of Schaul et al. (2016), Section 3.1 and Appendix B.1, and Q-learning on
its transitions. States 0..n−1, two actions: the 'right' action (`right_action`, alternating so
that no feature can generalize over it) moves on with reward 0, and from the last state ends the
episode with reward 1; the 'wrong' one ends the episode with reward 0. State-action pairs are
numbered `pair = 2 s + a`.

Q-learning is tabular or with linear function approximation (Appendix B.1, Equations 2 and 3):
Q(s, a) = θᵀφ(s, a), and one update on (S, A, R, S') is θ ← θ + η δ φ(S, A) with
δ = R + γ' max_a Q(S', a) − Q(S, A) (γ' = 0 when terminal). Tabular φ is the pair's one-hot
vector; linear adds a per-action bias, Q(s, a) = w_a[s] + b_a, which could learn "action a is
right" were it not for the alternation (Appendix B.1). The update kernels are compiled with
numba: a run makes up to millions of single updates, which the interpreter would dominate.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit


def right_action(state: np.ndarray | int) -> np.ndarray | int:
    """The action that moves on: 0 in even states, 1 in odd ones."""
    return state % 2


def discount(n: int) -> float:
    """γ = 1 − 1/n, which keeps the values on about the same scale for every n (App. B.1)."""
    return 1.0 - 1.0 / n


def memory_size(n: int) -> int:
    """Number of transitions the exhaustive fill produces: 2^(n+1) − 2 (App. B.1)."""
    return 2 ** (n + 1) - 2


def true_q_values(n: int) -> np.ndarray:
    """Q*(s, a) by pair: γ^(n−1−s) for the right action, 0 for the wrong one."""
    states = np.arange(n)
    q = np.zeros((n, 2))
    q[states, right_action(states)] = discount(n) ** (n - 1 - states)
    return q.reshape(-1)


@dataclass(frozen=True)
class Transitions:
    """A replay memory, one transition per array element (`next_state` 0, unused, when
    `terminal`). The exhaustive fill holds exactly one rewarded transition; a streaming memory
    overwrites the arrays in place and may hold none or several."""

    n: int
    pair: np.ndarray
    next_state: np.ndarray
    reward: np.ndarray
    terminal: np.ndarray

    def __len__(self) -> int:
        return self.pair.shape[0]


def episode_of(n: int, actions: np.ndarray) -> list[tuple[int, int, int, float, bool]]:
    """(state, action, next_state, reward, terminal) of each step of one action sequence from
    the start state, up to the episode's end (the actions after it are never taken)."""
    steps = []
    for state, action in enumerate(actions.tolist()):
        if action != right_action(state):
            steps.append((state, action, 0, 0.0, True))
            return steps
        last = state == n - 1
        steps.append((state, action, 0 if last else state + 1, 1.0 if last else 0.0, last))
    return steps


def exhaustive_transitions(n: int, rng: np.random.Generator) -> Transitions:
    """A memory of all 2^n action sequences of length n (the bits of k), in random order:
    Σ_j (j + 1) 2^(n−1−j) + n = 2^(n+1) − 2 transitions, pair (s, a) 2^(n−1−s) times, as often
    as a uniformly random behaviour policy meets it."""
    bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
    steps = [step for k in rng.permutation(2**n) for step in episode_of(n, bits[k])]
    columns = (np.array(column) for column in zip(*steps, strict=True))
    state, action, next_state, reward, terminal = columns
    return Transitions(
        n=n,
        pair=(2 * state + action).astype(np.int64),
        next_state=next_state.astype(np.int64),
        reward=reward.astype(np.float64),
        terminal=terminal.astype(bool),
    )


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
def _replay_sequence(update_arguments, q_true, indices, tolerance):
    """`QLearner.replay_sequence`'s loop, on `_update`'s arguments but the index: (updates,
    converged, largest |δ|, count of |δ| > 1)."""
    largest, above_one = 0.0, 0
    for k in range(indices.shape[0]):
        delta = _update(*update_arguments, indices[k])
        largest = max(largest, abs(delta))
        if abs(delta) > 1.0:
            above_one += 1
        if _mse(*update_arguments[:2], q_true) < tolerance:  # θ and has_bias
            return k + 1, True, largest, above_one
    return indices.shape[0], False, largest, above_one


class QLearner:
    """Q-learning on a memory. `theta` holds a weight per pair, then (`has_bias`) the biases of
    actions 0 and 1; `max_abs_td_error` and `td_errors_above_one` cover every update so far,
    to tell whether the samplers' clip of |δ| to 1 ever mattered."""

    def __init__(self, memory: Transitions, *, has_bias: bool, rng: np.random.Generator):
        self.memory = memory
        self.has_bias = has_bias
        self.gamma = discount(memory.n)
        self.step_size = STEP_SIZE
        self.q_true = true_q_values(memory.n)
        self.theta = rng.normal(0.0, INIT_STD, size=2 * memory.n + 2 * int(has_bias))
        self.feature_norms = np.linalg.norm(self.features(), axis=1)
        self.max_abs_td_error = 0.0
        self.td_errors_above_one = 0

    def features(self) -> np.ndarray:
        """φ of every pair as rows (2n × len(theta))."""
        pairs = 2 * self.memory.n
        features = np.eye(pairs, self.theta.shape[0])
        if self.has_bias:
            features[np.arange(pairs), pairs + np.arange(pairs) % 2] = 1.0
        return features

    def q_values(self) -> np.ndarray:
        return self.features() @ self.theta

    def mse(self) -> float:
        """Mean over the 2n state-action pairs of (Q − Q*)²."""
        return float(_mse(self.theta, self.has_bias, self.q_true))

    def td_errors(self, indices: np.ndarray) -> np.ndarray:
        """δ of the given memory transitions, without updating."""
        m = self.memory
        q = self.q_values().reshape(-1, 2)
        bootstrap = np.where(m.terminal[indices], 0.0, self.gamma * q[m.next_state[indices]].max(1))
        return m.reward[indices] + bootstrap - q.reshape(-1)[m.pair[indices]]

    def parameter_change_norms(self, indices: np.ndarray, td_errors: np.ndarray) -> np.ndarray:
        """‖Δθ‖ = η |δ| ‖φ(S, A)‖ of the updates with these δ (Equation 3)."""
        return self.step_size * np.abs(td_errors) * self.feature_norms[self.memory.pair[indices]]

    def update(self, index: int) -> tuple[float, float]:
        """One Q-learning update on memory transition `index`: returns (δ, MSE afterwards)."""
        delta = _update(*self._update_arguments(), index)
        self._record(abs(delta), int(abs(delta) > 1.0))
        return delta, _mse(self.theta, self.has_bias, self.q_true)

    def replay_sequence(self, indices: np.ndarray, tolerance: float = TOLERANCE) -> int | None:
        """Updates on `indices` until the MSE is below `tolerance`: how many, None if all."""
        made, converged, largest, above_one = _replay_sequence(
            self._update_arguments(),
            self.q_true,
            np.ascontiguousarray(indices, dtype=np.int64),
            tolerance,
        )
        self._record(largest, above_one)
        return made if converged else None

    def _update_arguments(self) -> tuple:
        m = self.memory
        return (
            self.theta, self.has_bias, m.pair, m.next_state, m.reward, m.terminal,
            self.gamma, self.step_size,
        )  # fmt: skip

    def _record(self, abs_delta: float, above_one: int) -> None:
        self.max_abs_td_error = max(self.max_abs_td_error, float(abs_delta))
        self.td_errors_above_one += int(above_one)
