"""Double DQN agent: networks, DeepMind's centered RMSProp, and the learner."""

from agents.double_dqn import (
    DoubleDQN,
    LearnStats,
    double_q_targets,
    resolve_device,
    weighted_huber_loss,
)
from agents.networks import NatureQNetwork
from agents.optimizer import CenteredRMSProp

__all__ = [
    "CenteredRMSProp",
    "DoubleDQN",
    "LearnStats",
    "NatureQNetwork",
    "double_q_targets",
    "resolve_device",
    "weighted_huber_loss",
]
