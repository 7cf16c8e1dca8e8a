"""Pure formulas of prioritized replay: the importance weights (Schaul et al. 2016, Section
3.4). The raw priorities come from `replay.priority_signals`."""

from typing import Literal

import numpy as np

WeightNormalization = Literal["batch", "buffer"]
WEIGHT_NORMALIZATIONS: tuple[str, ...] = ("batch", "buffer")


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
