"""The Blind Cliffwalk of Schaul et al. (2016), Section 3.1 and Appendix B.1.

States 0..n−1, two actions. In state s the 'right' action is `right_action(s)` (it alternates
from state to state, so no feature can generalize over which action is right). 'Right' moves
from s to s + 1 with reward 0, and from the last state n − 1 ends the episode with reward 1;
'wrong' ends the episode with reward 0 (the agent falls off the cliff back to the start).

State-action pairs are numbered `pair = 2 s + a` everywhere in this package.
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
    """Q*(s, a) indexed by pair 2 s + a: γ^(n−1−s) for the right action, 0 for the wrong one.

    Taking 'right' in s leads through n − 1 − s further zero-reward steps to the reward 1,
    discounted once per step; 'wrong' ends the episode with nothing.
    """
    states = np.arange(n)
    q = np.zeros((n, 2))
    q[states, right_action(states)] = discount(n) ** (n - 1 - states)
    return q.reshape(-1)


@dataclass(frozen=True)
class Transitions:
    """A replay memory of Blind Cliffwalk transitions, one entry per array element.

    `pair[i] = 2 s + a` of the transition's state and action, `next_state[i]` the state it
    leads to (0, unused, when `terminal[i]`), `reward[i]` its reward. In the exhaustive fill
    exactly one transition has reward 1; a streaming memory (`cliffwalk.streaming`) overwrites
    these arrays in place and may hold none or several.
    """

    n: int
    pair: np.ndarray
    next_state: np.ndarray
    reward: np.ndarray
    terminal: np.ndarray

    def __len__(self) -> int:
        return self.pair.shape[0]


def episode_of(n: int, actions: np.ndarray) -> list[tuple[int, int, int, float, bool]]:
    """Executes one action sequence from the start state until the episode terminates.

    Returns (state, action, next_state, reward, terminal) per step taken. Actions after the
    termination are never executed: that is what makes the exhaustive fill 2^(n+1) − 2 long.
    """
    steps = []
    for state, action in enumerate(actions.tolist()):
        if action != right_action(state):
            steps.append((state, action, 0, 0.0, True))
            return steps
        last = state == n - 1
        steps.append((state, action, 0 if last else state + 1, 1.0 if last else 0.0, last))
    return steps


def exhaustive_transitions(n: int, rng: np.random.Generator) -> Transitions:
    """Fills a memory by executing all 2^n action sequences of length n, in random order.

    Sequence k takes the actions given by the bits of k. A sequence whose first wrong action
    is at step j (0-based) yields j + 1 transitions and there are 2^(n−1−j) of those; the
    single all-right sequence yields n. In total Σ_j (j + 1) 2^(n−1−j) + n = 2^(n+1) − 2,
    the paper's count. Each pair (s, a) therefore appears 2^(n−1−s) times: the frequency a
    uniformly random behaviour policy would encounter it, with exactly one rewarded transition.
    """
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
