"""Raw priorities from a measure of expected learning progress (Schaul et al. 2016, Appendix A;
the method's patent names the same three): |δ| at the last replay, its change between the last
two replays, and the norm of the parameter change (`replay.priority_signals`'s formulas; this
module keeps the per-transition state they read).

Here ‖Δθ‖ = η |δ| ‖φ‖ with one ‖φ‖ per representation, so it orders transitions as |δ| does and
differs from |δ| + ε in scale only: ε is added after the scaling, and a new transition enters at
the largest raw priority so far, at least 1, while a replayed one gets at most about η‖φ‖.
"""

import numpy as np

from cliffwalk.learners import QLearner
from replay.priority_signals import SignalInputs, signal_named


class LearningProgress:
    """The raw priority (before α) of every memory slot under one signal. `priorities[s]` is
    the signal's at slot s's last replay, or the `max_priority` when it was filled (Algorithm 1);
    `max_priority`, at least 1, is the largest computed, as a sampler's fed these priorities;
    `_previous[s]` is slot s's δ at its last replay, NaN if none since it was filled."""

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
        """The new raw priority of slot `index`, replayed with δ `td_error` (before its update)."""
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
