"""The Blind Cliffwalk of Schaul et al. (2016), Section 3.1 and Appendix B.1: states 0..n−1, two
actions. The 'right' action (`right_action`, alternating so that no feature can generalize over
it) moves on with reward 0, and from the last state ends the episode with reward 1; the
'wrong' one ends the episode with reward 0. State-action pairs are numbered `pair = 2 s + a`.
"""

from dataclasses import dataclass

import numpy as np


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
