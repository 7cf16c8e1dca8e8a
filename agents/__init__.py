"""The agent: Q-networks, DeepMind's centered RMSProp, the learner, how its updates run, and
the ε-greedy policy everything acts through."""

from agents.devices import resolve_device
from agents.double_dqn import DoubleDQN
from agents.networks import NatureQNetwork
from agents.optimizer import CenteredRMSProp
from agents.policy import EpsilonGreedy
from agents.targets import double_q_targets, dqn_targets, weighted_huber_loss
from agents.updates import LearnStats

__all__ = [
    "CenteredRMSProp",
    "DoubleDQN",
    "EpsilonGreedy",
    "LearnStats",
    "NatureQNetwork",
    "double_q_targets",
    "dqn_targets",
    "resolve_device",
    "weighted_huber_loss",
]
