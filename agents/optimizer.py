"""Centered RMSProp: DeepMind's, as in their DQN Lua code (NeuralQLearner.lua), and torch's
`RMSprop(centered=True)`, which differ in where ε goes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

# `agent.optimizer`: where each rule puts ε (`epsilon_inside`).
OPTIMIZERS = {"deepmind_rmsprop": True, "torch_rmsprop": False}
STATISTICS = ("grad_avg", "square_avg")  # g and g2, by their names in the state dict


class CenteredRMSProp(torch.optim.Optimizer):
    """Centered RMSProp's hyperparameters and statistics g and g2 (zero, from construction and
    `load_state_dict` on), in a torch optimizer's state dict. It has no `step`: the learner's
    update applies `centered_rmsprop` to the online parameters and their g and g2."""

    def __init__(
        self,
        params: Iterable,
        *,
        lr: float,
        decay: float,
        epsilon: float,
        epsilon_inside: bool = True,
    ) -> None:
        self.epsilon_inside = epsilon_inside
        super().__init__(params, {"lr": lr, "decay": decay, "epsilon": epsilon})

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        self._allocate_state()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        # Copies: torch's `.to` would share an in-memory state dict's tensors with their source.
        # Older checkpoints lack g and g2 where a parameter never had a gradient (zeros).
        for state in self.state.values():
            state.update({key: value.clone() for key, value in state.items()})
        self._allocate_state()

    def _allocate_state(self) -> None:
        for group in self.param_groups:
            for param in group["params"]:
                if not self.state[param]:
                    self.state[param].update({key: torch.zeros_like(param) for key in STATISTICS})

    @torch.no_grad()
    def step_profile(self) -> dict[str, float]:
        """How large its steps are now, from g and g2: `mean_step`, the mean over parameters of
        lr·|g| / divisor (the step of a gradient equal to g); `epsilon_dominated`, the share of
        parameters whose divisor ε dominates (ε > g2 − g², or ε > √(g2 − g²) outside)."""
        step_sum, dominated, count = 0.0, 0, 0
        for group in self.param_groups:
            for grad_avg, square_avg in zip(*self.statistics(group["params"]), strict=True):
                variance = (square_avg - grad_avg * grad_avg).clamp_(min=0)
                spread = variance if self.epsilon_inside else variance.sqrt()
                divisor = spread + group["epsilon"]
                if self.epsilon_inside:
                    divisor.sqrt_()
                step_sum += float((grad_avg.abs() / divisor).sum()) * group["lr"]
                dominated += int((spread < group["epsilon"]).sum())
                count += grad_avg.numel()
        return {"mean_step": step_sum / count, "epsilon_dominated": dominated / count}

    def statistics(self, params: list[torch.Tensor]) -> tuple[list, list]:
        """g and g2 of `params`, in their order."""
        return tuple([self.state[param][key] for param in params] for key in STATISTICS)


def centered_rmsprop(
    params: list, grads: list, grad_avgs: list, square_avgs: list, group: dict, epsilon_inside: bool
) -> None:
    """Centered RMSProp without momentum, in place on lists of tensors (params, g and g2), with
    a param group's lr, decay and epsilon; by default epsilon INSIDE the square root:

        g  <- decay * g  + (1 - decay) * grad
        g2 <- decay * g2 + (1 - decay) * grad**2
        theta <- theta - lr * grad / sqrt(g2 - g**2 + epsilon)

    `epsilon_inside=False` is torch.optim.RMSprop(centered=True)'s sqrt(g2 - g**2) + epsilon,
    bit-identical to it on CPU. Eight `torch._foreach_*` calls (multi-tensor kernels on CUDA)
    in a per-parameter loop's order (bit-identical to it on CPU), syncing with the host nowhere."""
    lr, decay, epsilon = group["lr"], group["decay"], group["epsilon"]
    with torch.no_grad():
        if not epsilon_inside:  # torch.optim.RMSprop(centered=True)'s foreach steps
            torch._foreach_mul_(square_avgs, decay)
            torch._foreach_addcmul_(square_avgs, grads, grads, value=1.0 - decay)
            torch._foreach_lerp_(grad_avgs, grads, 1.0 - decay)
            denominators = torch._foreach_addcmul(square_avgs, grad_avgs, grad_avgs, value=-1.0)
            torch._foreach_sqrt_(denominators)
            torch._foreach_add_(denominators, epsilon)
            torch._foreach_addcdiv_(params, grads, denominators, value=-lr)
            return
        # Separate mul_ then add_/addcmul_ (not lerp_ or one fused expression): any other
        # grouping rounds differently and would break bit-identity with the per-parameter rule.
        torch._foreach_mul_(grad_avgs, decay)
        torch._foreach_add_(grad_avgs, grads, alpha=1.0 - decay)
        torch._foreach_mul_(square_avgs, decay)
        torch._foreach_addcmul_(square_avgs, grads, grads, value=1.0 - decay)
        variances = torch._foreach_addcmul(square_avgs, grad_avgs, grad_avgs, value=-1.0)
        torch._foreach_add_(variances, epsilon)
        torch._foreach_sqrt_(variances)
        torch._foreach_addcdiv_(params, grads, variances, value=-lr)
