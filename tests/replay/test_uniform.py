"""The uniform sampler: 1/N for each sampleable slot, priorities ignored."""

import numpy as np

from replay.sampler import UniformSampler


def test_every_sampleable_slot_has_one_over_n_whatever_the_batch_size():
    sampler = UniformSampler(6, np.random.default_rng(0))
    for slot in (5, 1, 3, 0):
        sampler.add(slot)
    sampler.remove(3)
    for batch_size in (1, 32):
        np.testing.assert_array_equal(
            sampler.probabilities(batch_size), np.array([1, 1, 0, 0, 0, 1]) / 3
        )
    assert sampler.min_probability() == 1 / 3


def test_update_changes_nothing():
    changed = UniformSampler(20, np.random.default_rng(7))
    untouched = UniformSampler(20, np.random.default_rng(7))
    for slot in range(20):
        changed.add(slot)
        untouched.add(slot)
    for _ in range(10):
        indices, probabilities = changed.sample(32)
        np.testing.assert_array_equal(indices, untouched.sample(32)[0])
        np.testing.assert_array_equal(probabilities, np.full(32, 1 / 20))
        changed.update(indices, np.full(32, 100.0))
    np.testing.assert_array_equal(changed.priorities(), np.ones(20))
    assert changed.max_priority == 1.0 and changed.min_probability() == 1 / 20
