"""Priorities from the learning-progress signals: what each replay sets, by hand."""

import numpy as np
import pytest

from cliffwalk.learners import QLearner, exhaustive_transitions
from cliffwalk.strategies import LearningProgress

EPSILON = 0.01


def progress(signal: str, has_bias: bool = False) -> LearningProgress:
    memory = exhaustive_transitions(3, np.random.default_rng(0))
    learner = QLearner(memory, has_bias=has_bias, rng=np.random.default_rng(0))
    return LearningProgress(signal, learner, EPSILON)


def test_td_error_is_the_clipped_error_plus_epsilon():
    tracker = progress("td_error")
    assert tracker.observe(2, -0.3) == pytest.approx(0.31)
    assert tracker.observe(5, 1.4) == pytest.approx(1.01)  # clipped to 1
    assert tracker.priorities[[2, 5]] == pytest.approx([0.31, 1.01])
    assert tracker.max_priority == pytest.approx(1.01)


def test_td_error_change_compares_with_the_slots_previous_replay():
    tracker = progress("td_error_change")
    assert tracker.observe(4, 0.5) == pytest.approx(0.51)  # first replay: previous counts as 0
    assert tracker.observe(4, -0.2) == pytest.approx(0.31)  # | |−0.2| − |0.5| | + ε
    assert tracker.observe(7, 0.2) == pytest.approx(0.21)  # another slot, its own history
    tracker.refill(4)  # a new transition in slot 4: no previous replay
    assert tracker.observe(4, 0.1) == pytest.approx(0.11)


@pytest.mark.parametrize(("has_bias", "feature_norm"), [(False, 1.0), (True, 2**0.5)])
def test_parameter_change_is_the_scaled_error_plus_epsilon(has_bias, feature_norm):
    tracker = progress("parameter_change", has_bias)
    assert tracker.observe(3, -0.4) == pytest.approx(0.25 * 0.4 * feature_norm + EPSILON)
    # A scaled copy of |δ|: the same order, but ε counts 1/(η ‖φ‖) times more in units of |δ|,
    # and new transitions still enter at 1, far above any replayed one.
    assert tracker.max_priority == 1.0


def test_new_transitions_enter_at_the_largest_priority_so_far():
    tracker = progress("td_error")
    assert np.all(tracker.priorities == 1.0)
    tracker.observe(0, 0.05)
    tracker.observe(1, 1.2)
    tracker.refill(0)
    assert tracker.priorities[0] == pytest.approx(1.01)


def test_unknown_signal_is_refused():
    with pytest.raises(ValueError, match="must be one of td_error, td_error_change"):
        progress("surprise")
