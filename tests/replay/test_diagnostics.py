import numpy as np

from replay.diagnostics import ReplayStatistics


def test_counts_ages_and_evictions_on_a_hand_built_sequence():
    stats = ReplayStatistics(capacity=4)
    for slot in range(4):
        stats.entered(slot)  # added_at = 0, 1, 2, 3; added = 4
    stats.sampled(np.array([1, 1, 3]))  # duplicates count twice; ages 3, 3, 1
    stats.learned(np.array([1, 3]), np.array([-0.5, 2.0], dtype=np.float32))
    stats.left(0)  # never replayed
    stats.left(1)  # replayed twice
    stats.entered(0)
    sampleable = np.array([True, False, True, True])
    summary = stats.summary(sampleable)
    assert summary["replay_stats/mean_sampled_age"] == 7 / 3
    assert summary["replay_stats/evicted_unreplayed_fraction"] == 0.5
    # Live slots 0 (new), 2, 3 were replayed 0, 0 and 1 times.
    assert summary["replay_stats/mean_replays_per_live_transition"] == 1 / 3
    assert summary["replay_stats/never_replayed_live_fraction"] == 2 / 3
    np.testing.assert_array_equal(stats.last_abs_td_error[[1, 3]], [0.5, 2.0])
    assert np.isnan(stats.last_abs_td_error[0])  # a new transition has not been seen yet
    # The sampled-age mean restarts with each summary.
    assert stats.summary(sampleable)["replay_stats/mean_sampled_age"] == 0.0


def test_state_dict_round_trip():
    stats = ReplayStatistics(capacity=3)
    stats.entered(0)
    stats.entered(1)
    stats.sampled(np.array([0]))
    copy = ReplayStatistics(capacity=3)
    copy.load_state_dict(stats.state_dict())
    mask = np.array([True, True, False])
    assert copy.summary(mask) == stats.summary(mask)
    np.testing.assert_array_equal(copy.replays, stats.replays)
