"""Learning-progress signals that become raw priorities p (before the exponent α): the paper's
|δ| and two more measures of expected learning progress its authors' patent names (the change
of |δ| between replays, and the norm of the parameter change a transition induces).

Each signal is a pure function, registered by its config name (`replay.priority_signal`) in
`PRIORITY_SIGNALS` as a `PrioritySignal`: what it reads of a batch's `SignalInputs`, and
whether the learner must compute the per-transition parameter-change norms for it. A new
signal is one function and one entry in `PRIORITY_SIGNALS`.

Every signal returns p ≥ ε > 0 (float64), so a transition is never unsampleable, and a new
transition gets the largest raw priority written so far (1 at first), whatever the signal.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from schema import one_of


def td_error_priorities(
    td_errors: np.ndarray, priority_epsilon: float, td_error_clip: float
) -> np.ndarray:
    """p = min(|δ|, clip) + ε, the paper's (Section 3.3).

    The clip is the paper's DQN TD-error clipping to [−1, 1]; ε keeps every transition
    sampleable once its error has shrunk to zero.
    """
    return np.minimum(np.abs(td_errors), td_error_clip).astype(np.float64) + priority_epsilon


def huber_loss_priorities(
    td_errors: np.ndarray, priority_epsilon: float, td_error_clip: float
) -> np.ndarray:
    """p = Huber_κ(δ) + ε with κ = clip: the transition's own unweighted loss, ½δ² for
    |δ| ≤ κ, κ(|δ| − ½κ) beyond (the prioritized DQN of Sujit et al. 2022 on MinAtar, with
    ε = 1e-5). Unlike |δ| it is not clipped, so large errors keep growing apart."""
    magnitude = np.abs(td_errors).astype(np.float64)
    quadratic = np.minimum(magnitude, td_error_clip)
    return quadratic * (magnitude - 0.5 * quadratic) + priority_epsilon


def td_error_change_priorities(
    td_errors: np.ndarray,
    previous_td_errors: np.ndarray,
    priority_epsilon: float,
    td_error_clip: float,
) -> np.ndarray:
    """p = | min(|δ|, clip) − min(|δ_prev|, clip) | + ε: how much the transition's clipped
    error changed between its previous replay and this one.

    A transition replayed for the first time (δ_prev NaN) counts its previous clipped |δ| as
    0, so its first priority is the paper's, min(|δ|, clip) + ε: before it was ever learned
    from, all of its error is still to be learned, and a large first error is what makes the
    paper replay it again. (Counting the max priority it entered with as its previous |δ|
    would mix a priority with an error, and rank a large first error below a small one.)
    """
    now = np.minimum(np.abs(td_errors), td_error_clip).astype(np.float64)
    previous = np.minimum(np.abs(previous_td_errors), td_error_clip).astype(np.float64)
    return np.abs(now - np.nan_to_num(previous, nan=0.0)) + priority_epsilon


def parameter_change_priorities(
    parameter_change_norms: np.ndarray, priority_epsilon: float
) -> np.ndarray:
    """p = m + ε for the learner's parameter-change norm m of each transition (what m is, and
    its scale, is `agents.per_sample.parameter_change_norms`'s docstring)."""
    return np.asarray(parameter_change_norms, dtype=np.float64) + priority_epsilon


class SignalInputs(NamedTuple):
    """What a signal may read of a batch: the learner's raw δ (float (B,)), each transition's
    δ at its previous replay (NaN where never replayed before), and the learner's
    per-transition parameter-change norms (`agents.per_sample`); each of the last two None
    unless the signal reads it."""

    td_errors: np.ndarray
    previous_td_errors: np.ndarray | None = None
    parameter_change_norms: np.ndarray | None = None


@dataclass(frozen=True)
class PrioritySignal:
    """`priorities(inputs, priority_epsilon, td_error_clip)`: a batch's raw priorities."""

    priorities: Callable[[SignalInputs, float, float], np.ndarray]
    reads_previous_td_errors: bool = False  # a gather from the replay statistics
    reads_parameter_change_norms: bool = False  # a second backward pass per update


PRIORITY_SIGNALS: dict[str, PrioritySignal] = {
    "td_error": PrioritySignal(
        lambda x, epsilon, clip: td_error_priorities(x.td_errors, epsilon, clip)
    ),
    "td_error_change": PrioritySignal(
        lambda x, epsilon, clip: td_error_change_priorities(
            x.td_errors, x.previous_td_errors, epsilon, clip
        ),
        reads_previous_td_errors=True,
    ),
    "parameter_change": PrioritySignal(
        lambda x, epsilon, clip: parameter_change_priorities(x.parameter_change_norms, epsilon),
        reads_parameter_change_norms=True,
    ),
    "huber_loss": PrioritySignal(
        lambda x, epsilon, clip: huber_loss_priorities(x.td_errors, epsilon, clip)
    ),
}


def signal_named(name: str) -> PrioritySignal:
    """The signal `name`, or a one-line ValueError naming `replay.priority_signal`."""
    one_of(PRIORITY_SIGNALS).check("replay.priority_signal", name)
    return PRIORITY_SIGNALS[name]
