"""The streaming memory: which transition it forgets, the stream it is fed, and runs."""

import numpy as np
import pytest

from cliffwalk.learners import episode_of, memory_size
from cliffwalk.strategies import ReplaySettings
from cliffwalk.streaming import (
    STREAM_STRATEGIES,
    evicted_slot,
    memory_capacity,
    random_episodes,
    run_streaming,
)


def test_fifo_forgets_the_oldest_whatever_the_priorities():
    arrival = np.array([7, 4, 9, 5])
    priorities = np.array([0.02, 1.0, 0.01, 0.5])
    assert evicted_slot("fifo", arrival, priorities) == 1


def test_lowest_priority_forgets_the_smallest_priority():
    arrival = np.array([7, 4, 9, 5])
    priorities = np.array([0.02, 1.0, 0.01, 0.5])
    assert evicted_slot("lowest_priority", arrival, priorities) == 2


def test_lowest_priority_ties_go_to_the_oldest():
    arrival = np.array([7, 4, 9, 5, 6])
    priorities = np.array([0.3, 1.0, 0.3, 0.5, 0.3])
    assert evicted_slot("lowest_priority", arrival, priorities) == 4  # arrived at 6, before 7, 9


def test_unreplayed_transitions_tie_at_the_maximal_priority_and_the_oldest_goes():
    # A full memory nothing was replayed from yet: every slot holds the entry priority 1.
    arrival = np.array([2, 0, 1])
    priorities = np.ones(3)
    assert evicted_slot("lowest_priority", arrival, priorities) == 1
    assert evicted_slot("fifo", arrival, priorities) == 1


def test_stream_is_random_episodes_from_the_start_state():
    n = 4
    stream = random_episodes(n, np.random.default_rng(5))
    steps = [next(stream) for _ in range(200)]
    rng = np.random.default_rng(5)
    expected = []
    while len(expected) < 200:
        expected += episode_of(n, rng.integers(0, 2, size=n))
    assert steps == expected[:200]
    starts = [0] + [i + 1 for i, step in enumerate(steps[:-1]) if step[4]]
    assert all(steps[i][0] == 0 for i in starts)


def test_capacity_is_a_fraction_of_the_papers_memory():
    assert memory_capacity(8, 0.25) == memory_size(8) // 4 == 127
    assert memory_capacity(2, 0.01) == 1


@pytest.mark.parametrize("strategy", STREAM_STRATEGIES)
@pytest.mark.parametrize("representation", ["tabular", "linear"])
def test_every_streaming_variant_converges_with_a_memory_smaller_than_its_stream(
    representation, strategy
):
    settings = ReplaySettings()
    result = run_streaming(f"{representation}/{strategy}", 5, seed=0, settings=settings)
    assert result.status == "converged" and result.final_mse < 1e-3
    assert result.transitions == 15  # a quarter of 62
    generated = -(-(result.updates_before_reward + result.updates) // settings.replay_ratio)
    assert generated > result.transitions


def test_every_variant_waits_equally_for_the_first_reward():
    """Common random numbers: one seed, one stream, whatever the replay does."""
    waits = {
        run_streaming(f"tabular/{strategy}", 6, 3, ReplaySettings()).updates_before_reward
        for strategy in STREAM_STRATEGIES
    }
    assert len(waits) == 1


def test_runs_without_a_reward_within_the_cap_are_capped():
    settings = ReplaySettings(max_updates=16)  # two transitions' worth
    result = run_streaming("tabular/uniform+fifo", 8, 0, settings)
    assert (result.status, result.updates_before_reward, result.updates) == ("capped", 16, 0)
