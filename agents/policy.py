"""The ε-greedy policy of a Q-network: how training, the periodic test, the evaluation worker
and evaluate.py all act."""

from __future__ import annotations

import numpy as np
import torch

from agents.devices import use_device


class EpsilonGreedy:
    """ε-greedy actions of `network` (on `device`, read as it is at each action: the policy
    owns no parameters) for one uint8 (history_length, *frame_shape) state at a time.

    One uniform draw per action decides exploration and a second picks the random action, so
    the random stream does not depend on Q. `rng` is the default stream (the training run's);
    an evaluator passes its own to `act`. On CUDA the greedy action comes from
    `agents.acceleration.GreedyActions`, captured when `cuda_graphs`.
    """

    def __init__(
        self,
        network: torch.nn.Module,
        device: torch.device,
        num_actions: int,
        history_length: int,
        rng: np.random.Generator | None = None,
        cuda_graphs: bool = False,
    ) -> None:
        self.network, self.device = network, device
        self.num_actions, self.history_length = num_actions, history_length
        self.rng, self.cuda_graphs = rng, cuda_graphs
        use_device(device)
        self._greedy_on_gpu = None
        if device.type == "cuda":
            from agents.acceleration import GreedyActions  # CUDA alone needs the CUDA corner

            self._greedy_on_gpu = GreedyActions(network, device, cuda_graphs)

    def act(self, state: np.ndarray, epsilon: float, rng: np.random.Generator | None = None) -> int:
        rng = self.rng if rng is None else rng
        if rng.random() < epsilon:
            return int(rng.integers(self.num_actions))
        if self._greedy_on_gpu is not None:
            return self._greedy_on_gpu(state)
        with torch.inference_mode():
            frames = torch.from_numpy(state).unsqueeze(0)
            return int(self.network(frames).argmax(dim=1).item())
