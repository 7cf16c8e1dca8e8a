"""Raw priorities from a measure of expected learning progress (Schaul et al. 2016,
Appendix A; the method's patent names the same three): |δ| at the transition's last replay,
the change of |δ| between its last two replays, and the norm of the parameter change its
update induced. The formulas are `replay.priority_signals`'; this module keeps the
per-transition state they read.

For the learners here the update is Δθ = η δ φ(S, A), so the parameter-change norm is
η |δ| ‖φ(S, A)‖ with the same ‖φ‖ for every pair (1 tabular, √2 linear): it orders
transitions exactly as |δ| does. It differs from |δ| + ε only in scale, which matters in
two places: ε is added after the scaling (so, in units of |δ|, it weighs 1/(η‖φ‖) times
more), and a new transition enters at the largest raw priority so far, at least 1, while a
replayed one gets at most about η‖φ‖ (|δ| ≤ 1 here).
"""

import numpy as np

from cliffwalk.learners import QLearner
from replay.priority_signals import SignalInputs, signal_named


class LearningProgress:
    """The raw priority (before α) of every memory slot under one signal.

    Invariants: `priorities[s]` is what the signal gave slot s at its last replay, or, if the
    slot has not been replayed since it was filled, the `max_priority` of that moment (a new
    transition enters at the largest priority so far, Algorithm 1, as the samplers do);
    `max_priority` is the largest raw priority ever computed here, and at least 1, so it equals
    the `max_priority` of a sampler fed only these priorities; `_previous[s]` is slot s's δ at
    its last replay, NaN if it was never replayed since it was filled.
    """

    def __init__(
        self, signal: str, learner: QLearner, priority_epsilon: float, td_error_clip: float = 1.0
    ):
        self.signal = signal
        self._signal = signal_named(signal)  # also rejects an unknown signal
        self._learner = learner
        self._priority_epsilon, self._td_error_clip = priority_epsilon, td_error_clip
        size = len(learner.memory)
        self.max_priority = 1.0
        self.priorities = np.full(size, self.max_priority)
        self._previous = np.full(size, np.nan)

    def observe(self, index: int, td_error: float) -> float:
        """Records a replay of slot `index` whose δ (before its update) was `td_error`, and
        returns the slot's new raw priority."""
        indices, td_errors = np.array([index]), np.array([td_error])
        norms = None
        if self._signal.reads_parameter_change_norms:
            norms = self._learner.parameter_change_norms(indices, td_errors)
        inputs = SignalInputs(td_errors, self._previous[indices], norms)
        priorities = self._signal.priorities(inputs, self._priority_epsilon, self._td_error_clip)
        priority = float(priorities[0])
        self._previous[index] = td_error
        self.priorities[index] = priority
        self.max_priority = max(self.max_priority, priority)
        return priority

    def refill(self, index: int) -> None:
        """Slot `index` now holds a new transition: never replayed, at the largest priority."""
        self._previous[index] = np.nan
        self.priorities[index] = self.max_priority
