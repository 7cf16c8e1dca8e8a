"""The pure formulas of replay/priorities.py, checked against numbers worked out by hand."""

import math

import numpy as np
import pytest

from replay.priorities import importance_weights


def test_batch_normalized_weights_by_hand():
    # w_i = (N P_i)^−β = (0.3, 0.6, 2.1)^−½; the largest is the first, so
    # w_i / w_max = (P_min / P_i)^½ = (1, √½, √(1/7)).
    weights = importance_weights(np.array([0.1, 0.2, 0.7]), 0.5, "batch")
    np.testing.assert_allclose(weights, [1.0, math.sqrt(0.5), math.sqrt(1 / 7)], rtol=1e-6)
    assert weights.dtype == np.float32


def test_buffer_normalized_weights_by_hand():
    # Normalized by the weight of the least likely stored transition, P_min = 0.05:
    # (P_min / P_i)^½ = (√½, ½, √(1/14)).
    weights = importance_weights(np.array([0.1, 0.2, 0.7]), 0.5, "buffer", 0.05)
    np.testing.assert_allclose(weights, [math.sqrt(0.5), 0.5, math.sqrt(1 / 14)], rtol=1e-6)


def test_full_correction_at_beta_one_by_hand():
    # β = 1: w = 1 / (N P) = (1/0.3, 1/0.6, 1/2.1), over the largest: (1, ½, 1/7).
    weights = importance_weights(np.array([0.1, 0.2, 0.7]), 1.0, "batch")
    np.testing.assert_allclose(weights, [1.0, 0.5, 1 / 7], rtol=1e-6)


def test_beta_zero_gives_unit_weights():
    weights = importance_weights(np.array([0.1, 0.2, 0.7]), 0.0, "batch")
    np.testing.assert_array_equal(weights, [1.0, 1.0, 1.0])


@pytest.mark.parametrize("size", [1, 3, 49, 1_000_000])  # 49 · fl(1/49) is not exactly 1
@pytest.mark.parametrize("normalization", ["batch", "buffer"])
def test_uniform_probabilities_give_weights_of_exactly_one(size, normalization):
    probabilities = np.full(32, 1.0 / size)
    weights = importance_weights(probabilities, 0.4, normalization, 1.0 / size)
    np.testing.assert_array_equal(weights, np.ones(32, dtype=np.float32))


def test_weights_never_exceed_one_under_batch_normalization():
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(100))[:32]
    weights = importance_weights(probabilities, 0.7, "batch")
    assert weights.max() == 1.0 and (weights > 0).all()


def test_buffer_normalization_needs_min_probability():
    with pytest.raises(ValueError, match="min_probability"):
        importance_weights(np.array([0.5, 0.5]), 0.5, "buffer")


def test_unknown_normalization_is_refused():
    with pytest.raises(ValueError, match="normalization"):
        importance_weights(np.array([0.5, 0.5]), 0.5, "global")
