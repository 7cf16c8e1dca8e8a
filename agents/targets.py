"""The TD targets and the loss the learner minimizes: pure functions of tensors."""

from __future__ import annotations

import torch

# `agent.target_rule`: Double DQN's target (the paper's) or DQN's.
TARGET_RULES = ("double_dqn", "dqn")


def weighted_huber_loss(
    td_errors: torch.Tensor, weights: torch.Tensor, kappa: float
) -> torch.Tensor:
    """mean_i weights_i * Huber_kappa(td_errors_i). Huber's derivative is clip(delta, -kappa,
    kappa), so kappa = 1 is the paper's TD-error clipping to [-1, 1]."""
    per_sample = torch.nn.functional.huber_loss(
        td_errors, torch.zeros_like(td_errors), reduction="none", delta=kappa
    )
    return (weights * per_sample).mean()


def double_q_targets(
    next_q_online: torch.Tensor,
    next_q_target: torch.Tensor,
    rewards: torch.Tensor,
    terminals: torch.Tensor,
    discount: float,
) -> torch.Tensor:
    """y = r + discount * (1 - terminal) * Q_target(S', argmax_a Q_online(S', a)): the online
    network selects the next action, the target network evaluates it (van Hasselt et al.)."""
    next_actions = next_q_online.argmax(dim=1, keepdim=True)
    next_values = next_q_target.gather(1, next_actions).squeeze(1)
    return rewards + discount * (1.0 - terminals) * next_values


def dqn_targets(
    next_q_target: torch.Tensor, rewards: torch.Tensor, terminals: torch.Tensor, discount: float
) -> torch.Tensor:
    """y = r + discount * (1 - terminal) * max_a Q_target(S', a): DQN's target (Mnih et al.
    2015), which the published MinAtar agents use."""
    return rewards + discount * (1.0 - terminals) * next_q_target.max(dim=1).values
