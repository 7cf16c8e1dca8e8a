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
    size: int,
    importance_exponent: float,
    normalization: WeightNormalization = "batch",
    min_probability: float | None = None,
) -> np.ndarray:
    """w_i = (N · P(i))^−β scaled so that the largest weight is 1 (float32).

    `normalization="batch"` divides by the minibatch maximum, which is what the paper's author
    used; `"buffer"` divides by the largest weight any stored transition could get, i.e. the one
    of `min_probability`. Uniform probabilities give weights of exactly 1 under both.
    """
    if normalization not in WEIGHT_NORMALIZATIONS:
        raise ValueError(
            f"weight normalization {normalization!r} is not one of {WEIGHT_NORMALIZATIONS}"
        )
    weights = (size * np.asarray(probabilities, dtype=np.float64)) ** -importance_exponent
    if normalization == "batch":
        largest = weights.max()
    else:
        if min_probability is None:
            raise ValueError("buffer-wide weight normalization needs min_probability")
        largest = (size * min_probability) ** -importance_exponent
    return (weights / largest).astype(np.float32)
