"""Pure formulas of prioritized replay (Schaul et al. 2016, Sections 3.3 and 3.4)."""

from typing import Literal

import numpy as np

WeightNormalization = Literal["batch", "buffer"]
WEIGHT_NORMALIZATIONS: tuple[str, ...] = ("batch", "buffer")


def priorities_from_td_errors(
    td_errors: np.ndarray, priority_epsilon: float, td_error_clip: float = 1.0
) -> np.ndarray:
    """Raw priorities p = min(|δ|, clip) + ε, before the exponent α.

    The clip is the paper's DQN TD-error clipping to [−1, 1]; ε keeps every transition
    sampleable once its error has shrunk to zero.
    """
    return np.minimum(np.abs(td_errors), td_error_clip).astype(np.float64) + priority_epsilon


def importance_weights(
    probabilities: np.ndarray,
    importance_exponent: float,
    normalization: WeightNormalization = "batch",
    min_probability: float | None = None,
) -> np.ndarray:
    """w_i = (N · P(i))^−β scaled so that the largest weight is 1 (float32).

    The largest weight belongs to the smallest probability P_min, so the scaled weight is
    (P_min / P(i))^β and the memory size N cancels. `normalization="batch"` takes P_min over
    the minibatch, which is what the paper's author used; `"buffer"` takes the smallest
    probability any stored transition has (`min_probability`). Uniform probabilities give
    weights of exactly 1 under both.
    """
    if normalization not in WEIGHT_NORMALIZATIONS:
        raise ValueError(
            f"weight normalization {normalization!r} is not one of {WEIGHT_NORMALIZATIONS}"
        )
    if normalization == "batch":
        min_probability = probabilities.min()
    elif min_probability is None:
        raise ValueError("buffer-wide weight normalization needs min_probability")
    return ((min_probability / probabilities) ** importance_exponent).astype(np.float32)
