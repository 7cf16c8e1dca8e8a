"""The priority signals of replay/priority_signals.py on hand-built cases (ε and the values are
binary fractions, so every expected priority is exact), and the contract of every signal in
`PRIORITY_SIGNALS`, through the replay buffer too: a signal added to the registry is checked
unchanged."""

import numpy as np
import pytest

from replay.priority_signals import (
    PRIORITY_SIGNALS,
    SignalInputs,
    huber_loss_priorities,
    parameter_change_priorities,
    signal_named,
    td_error_change_priorities,
    td_error_priorities,
)
from tests.replay.test_buffer import learned, proportional_buffer, raw_priorities

NEVER = np.nan  # a previous δ of a transition never replayed before


def test_td_error_priority_is_clipped_absolute_error_plus_epsilon():
    td_errors = np.array([0.0, 0.5, -0.5, 1.0, -3.0, 250.0], dtype=np.float32)
    priorities = td_error_priorities(td_errors, priority_epsilon=0.25, td_error_clip=1.0)
    np.testing.assert_array_equal(priorities, [0.25, 0.75, 0.75, 1.25, 1.25, 1.25])
    assert priorities.dtype == np.float64


def test_td_error_priority_uses_the_given_clip():
    priorities = td_error_priorities(np.array([-5.0, 1.5, 0.25]), 0.25, td_error_clip=2.0)
    np.testing.assert_array_equal(priorities, [2.25, 1.75, 0.5])


def test_td_error_change_is_the_change_of_the_clipped_error_between_replays():
    td_errors = np.array([0.5, -0.25, 2.0, -0.5, 0.75], dtype=np.float32)
    previous = np.array([0.25, -1.0, 0.5, 3.0, 0.75], dtype=np.float32)
    priorities = td_error_change_priorities(
        td_errors, previous, priority_epsilon=0.125, td_error_clip=1.0
    )
    # |0.5 − 0.25|, |0.25 − 1|, |min(2, 1) − 0.5|, |0.5 − min(3, 1)|, no change: then + ε.
    np.testing.assert_array_equal(priorities, [0.375, 0.875, 0.625, 0.625, 0.125])
    assert priorities.dtype == np.float64


def test_td_error_change_clips_both_errors_with_the_given_clip():
    priorities = td_error_change_priorities(
        np.array([3.0, -1.5]), np.array([1.5, 5.0]), 0.125, td_error_clip=2.0
    )
    np.testing.assert_array_equal(priorities, [0.625, 0.625])  # |2 − 1.5|, |1.5 − 2|


def test_a_first_replay_counts_its_previous_error_as_zero_the_papers_priority():
    td_errors = np.array([0.5, -3.0, 0.0, 0.75])
    previous = np.array([NEVER, NEVER, NEVER, 0.25])
    priorities = td_error_change_priorities(td_errors, previous, 0.125, td_error_clip=1.0)
    np.testing.assert_array_equal(priorities, [0.625, 1.125, 0.125, 0.625])
    np.testing.assert_array_equal(
        priorities[:3], td_error_priorities(td_errors[:3], 0.125, td_error_clip=1.0)
    )


def test_parameter_change_priority_is_the_norm_plus_epsilon():
    priorities = parameter_change_priorities(np.array([0.0, 0.5, 2.0], dtype=np.float32), 0.25)
    np.testing.assert_array_equal(priorities, [0.25, 0.75, 2.25])
    assert priorities.dtype == np.float64


def test_signals_leave_their_inputs_alone():
    td_errors, previous = np.array([-2.0, 0.25]), np.array([NEVER, -0.5])
    td_error_priorities(td_errors, 0.25, td_error_clip=1.0)
    td_error_change_priorities(td_errors, previous, 0.25, td_error_clip=1.0)
    np.testing.assert_array_equal(td_errors, [-2.0, 0.25])
    np.testing.assert_array_equal(previous, [NEVER, -0.5])


def test_only_the_parameter_change_signal_needs_the_learners_norms():
    def reads(name):
        return signal_named(name).reads_parameter_change_norms

    assert reads("parameter_change")
    assert not any(map(reads, ("td_error", "td_error_change", "huber_loss")))


def test_huber_loss_priority_is_the_unclipped_loss_plus_epsilon():
    # ½δ² inside the clip, clip·(|δ| − ½clip) beyond it; either sign.
    priorities = huber_loss_priorities(np.array([0.5, -2.0, 3.0, 0.0]), 1e-5, td_error_clip=1.0)
    np.testing.assert_array_equal(priorities, [0.125 + 1e-5, 1.5 + 1e-5, 2.5 + 1e-5, 1e-5])
    assert priorities.dtype == np.float64
    assert huber_loss_priorities(np.array([4.0]), 0.0, td_error_clip=2.0)[0] == 6.0


def test_an_unknown_signal_is_a_one_line_error_naming_the_key():
    with pytest.raises(ValueError) as error:
        signal_named("loss")
    assert str(error.value) == (
        f"replay.priority_signal=loss is not allowed: must be one of {', '.join(PRIORITY_SIGNALS)}"
    )


@pytest.fixture(params=list(PRIORITY_SIGNALS))
def signal(request) -> str:
    return request.param


def signal_inputs(rng: np.random.Generator, size: int = 64) -> SignalInputs:
    """Inputs as the buffer hands them: errors of either sign, zero and past the clip, previous
    errors NaN where never replayed, norms ≥ 0 with a zero."""
    previous = rng.normal(scale=2.0, size=size)
    previous[rng.random(size) < 0.3] = NEVER
    return SignalInputs(
        td_errors=np.r_[0.0, rng.normal(scale=2.0, size=size - 1)].astype(np.float32),
        previous_td_errors=previous.astype(np.float32),
        parameter_change_norms=np.r_[0.0, rng.exponential(size=size - 1)].astype(np.float32),
    )


def test_every_signal_is_a_pure_function_to_float64_priorities_of_at_least_epsilon(signal):
    rng = np.random.default_rng(5)
    for _ in range(20):
        inputs = signal_inputs(rng)
        before = [np.copy(value) for value in inputs]
        priorities = PRIORITY_SIGNALS[signal].priorities(inputs, 0.01, 1.0)
        assert priorities.dtype == np.float64 and priorities.shape == (64,)
        assert np.isfinite(priorities).all() and (priorities >= 0.01).all()
        for value, copy in zip(inputs, before, strict=True):
            np.testing.assert_array_equal(value, copy)  # inputs left alone
        np.testing.assert_array_equal(
            PRIORITY_SIGNALS[signal].priorities(inputs, 0.01, 1.0), priorities
        )


def test_the_buffer_hands_every_signal_its_inputs(signal):
    """A first replay of slots 0..2 through a buffer of that signal: each gets the priority the
    signal gives for what the learner returned (and no previous error)."""
    buffer = proportional_buffer(signal, priority_epsilon=0.125)
    td_errors, norms = np.array([0.5, -2.0, 0.0]), np.array([0.25, 3.0, 0.0])
    buffer.update_priorities(np.array([0, 1, 2]), learned(td_errors, norms=norms))
    inputs = SignalInputs(td_errors.astype(np.float32), np.full(3, NEVER), norms)
    expected = PRIORITY_SIGNALS[signal].priorities(inputs, 0.125, 1.0)
    np.testing.assert_array_equal(raw_priorities(buffer, [0, 1, 2]), expected)
