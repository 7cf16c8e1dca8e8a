"""The ε-greedy policy everything acts through: uniform exploration that never calls the
network, the network's argmax otherwise, and random draws only from the stream it is given."""

import numpy as np
import torch
from test_double_dqn import LookupQ, make_agent, random_batch

from agents.policy import EpsilonGreedy

CPU = torch.device("cpu")


def policy_of(network, num_actions: int, seed: int = 0) -> EpsilonGreedy:
    return EpsilonGreedy(network, CPU, num_actions, 4, rng=np.random.default_rng(seed))


def test_epsilon_one_is_uniform_and_skips_the_network():
    policy = policy_of(None, 18, seed=3)  # any network call would fail
    state = np.zeros((4, 84, 84), np.uint8)
    counts = np.bincount([policy.act(state, 1.0) for _ in range(18_000)], minlength=18)
    chi_square = ((counts - 1000) ** 2 / 1000).sum()
    assert counts.min() > 0
    assert chi_square < 40.79


def test_epsilon_zero_is_greedy():
    policy = policy_of(LookupQ([[0, 1, 0], [0, 0, 2], [3, 1, 2]]), 3)
    for state_id, best in enumerate([1, 2, 0]):
        assert policy.act(np.full((4, 84, 84), state_id, np.uint8), 0.0) == best


def test_the_learners_policy_is_its_online_networks_argmax_after_each_update():
    agent = make_agent(num_actions=6)
    states = random_batch(4).all_states
    for seed in range(3):
        with torch.no_grad():
            expected = agent.online(torch.from_numpy(states)).argmax(1).tolist()
        assert [agent.policy.act(s, 0.0) for s in states] == expected
        assert agent.online_policy() is agent.policy  # not pipelined: the same network
        agent.learn(random_batch(seed=seed))


def test_an_explicit_rng_leaves_the_default_stream_alone():
    network = LookupQ([[0, 0, 0, 4, 0, 0]])
    policy, twin = policy_of(network, 6, seed=5), policy_of(network, 6, seed=5)
    state = np.zeros((4, 84, 84), np.uint8)
    evaluation_rng, replica = np.random.default_rng(9), np.random.default_rng(9)
    actions = [policy.act(state, 0.5, rng=evaluation_rng) for _ in range(200)]
    # The same draws made by hand: one uniform decides, a second picks the random action.
    expected = [int(replica.integers(6)) if replica.random() < 0.5 else 3 for _ in range(200)]
    assert actions == expected
    assert 0 < actions.count(3) < 200
    # The default generator did not move: it still matches an untouched twin.
    assert [policy.act(state, 0.5) for _ in range(50)] == [twin.act(state, 0.5) for _ in range(50)]
