"""The ε-greedy policy of a Q-network: how training, the periodic test, the evaluation worker
and evaluate.py all act; and the device it and the learner run on (`agent.device`)."""

from __future__ import annotations

import numpy as np
import torch

from schema import DEVICE


class EpsilonGreedy:
    """ε-greedy actions of `network` (on `device`, read as it is at each action: the policy
    owns no parameters) for one uint8 (history_length, *frame_shape) state at a time. One
    uniform draw decides exploration and a second picks the random action: the random stream
    does not depend on Q. `rng`: the default stream (training's); an evaluator passes its own
    to `act`. On CUDA, `agents.acceleration.GreedyActions` (captured when `cuda_graphs`)."""

    def __init__(
        self,
        network: torch.nn.Module,
        device: torch.device,
        num_actions: int,
        history_length: int,
        rng: np.random.Generator | None = None,
        cuda_graphs: bool = False,
    ) -> None:
        self.network, self.rng = network, rng
        self.num_actions, self.history_length = num_actions, history_length
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


def use_device(device: torch.device) -> None:
    """Prepare this process to compute on `device` (the CPU needs nothing). A CUDA device
    becomes the current one: streams, events and graph capture without a device argument use
    it (cuda:N, N > 0, would otherwise synchronize with cuda:0). cuDNN's TF32 convolutions
    (10-bit mantissas) go off: the paper's arithmetic is float32. `cudnn.benchmark` times
    kernels for the fixed shapes, so two processes may pick different ones (rounding)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False


def resolve_device(name: str) -> torch.device:
    """`agent.device` (or a command line's) as a torch.device: 'auto' is cuda where available, a
    CUDA device has its index (`cuda:0 == cuda` is False); a one-line ValueError if unusable."""
    DEVICE.check("agent.device", name)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = name.partition(":")[2]  # "" for "cuda"
    if int(index or 0) >= available:
        raise ValueError(
            f"agent.device={name!r} but {available} CUDA device(s) are available; "
            "use one of 'auto', 'cpu', 'cuda' or 'cuda:N'"
        )
    return torch.device("cuda", int(index or torch.cuda.current_device()))


def check_pipelined(pipelined: bool, device: torch.device) -> None:
    """`agent.pipelined` needs CUDA: on a CPU acting and the update compete for the cores."""
    if pipelined and device.type != "cuda":
        raise ValueError("agent.pipelined=true needs agent.device=cuda")
