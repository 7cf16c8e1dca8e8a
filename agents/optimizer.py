"""DeepMind's centered RMSProp, as in their DQN Lua code (NeuralQLearner.lua)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class CenteredRMSProp(torch.optim.Optimizer):
    """Centered RMSProp with epsilon INSIDE the square root and no momentum:

        g  <- decay * g  + (1 - decay) * grad
        g2 <- decay * g2 + (1 - decay) * grad**2
        theta <- theta - lr * grad / sqrt(g2 - g**2 + epsilon)

    torch.optim.RMSprop(centered=True) divides by sqrt(g2 - g**2) + epsilon instead, which is
    a different update for any epsilon > 0, hence this class. g and g2 start at zero.
    """

    def __init__(
        self, params: Iterable, lr: float, decay: float = 0.95, epsilon: float = 0.01
    ) -> None:
        if not (lr >= 0.0 and 0.0 <= decay < 1.0 and epsilon > 0.0):
            raise ValueError(
                f"need lr >= 0, 0 <= decay < 1, epsilon > 0; got {lr}, {decay}, {epsilon}"
            )
        super().__init__(params, {"lr": lr, "decay": decay, "epsilon": epsilon})

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, decay, epsilon = group["lr"], group["decay"], group["epsilon"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad, state = param.grad, self.state[param]
                if not state:
                    state["grad_avg"] = torch.zeros_like(param)
                    state["square_avg"] = torch.zeros_like(param)
                grad_avg, square_avg = state["grad_avg"], state["square_avg"]
                grad_avg.mul_(decay).add_(grad, alpha=1.0 - decay)
                square_avg.mul_(decay).addcmul_(grad, grad, value=1.0 - decay)
                variance = square_avg.addcmul(grad_avg, grad_avg, value=-1.0)
                param.addcdiv_(grad, variance.add_(epsilon).sqrt_(), value=-lr)
        return loss
