"""The Q-networks, by name (`agent.network`): each takes uint8 frames (pixels or 0/1 channels:
replay and transfers stay 4x smaller) and returns float32 Q values (B, num_actions)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from schema import one_of

FRAME_SIZE = 84  # frames are 84x84 grayscale (the paper's preprocessing)
CONV_OUTPUT_SIZE = 64 * 7 * 7  # 84 -(8/4)-> 20 -(4/2)-> 9 -(3/1)-> 7, 64 channels = 3136


class NatureQNetwork(nn.Module):
    """Q(s, ·) of the Nature DQN (Mnih et al. 2015) for (B, history_length, 84, 84) pixels
    scaled to [0, 1]; its head is a linear map WITHOUT per-action biases plus ONE bias shared
    by all actions, as in the tuned Double DQN (van Hasselt et al. 2016) the PER paper used."""

    shared_bias = True

    def __init__(self, num_actions: int, history_length: int, frame_shape: tuple[int, ...]) -> None:
        super().__init__()
        if tuple(frame_shape) != (FRAME_SIZE, FRAME_SIZE):
            raise ValueError(f"the Nature network takes 84x84 frames, not {tuple(frame_shape)}")
        # torch's default init (kaiming_uniform with a=sqrt(5), bias bound 1/sqrt(fan_in)) is
        # exactly Torch7's uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) used in DeepMind's DQN code.
        self.features = nn.Sequential(
            nn.Conv2d(history_length, 32, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(CONV_OUTPUT_SIZE, 512),
            nn.ReLU(),
        )
        self.head = nn.Linear(512, num_actions, bias=not self.shared_bias)
        if self.shared_bias:
            bound = 1.0 / math.sqrt(512)  # same rule as a linear layer's bias with fan_in 512
            self.head_bias = nn.Parameter(torch.empty(()).uniform_(-bound, bound))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        q = self.head(self.features(uint8_frames(self, frames).float().div_(255.0)))
        return q + self.head_bias if self.shared_bias else q


class NatureDQNNetwork(NatureQNetwork):
    """The Nature DQN network as published, a bias per action (Mnih et al. 2015)."""

    shared_bias = False


class DopamineQNetwork(NatureDQNNetwork):
    """Dopamine's Nature network (`atari_lib.NatureDQNNetwork`, Castro et al. 2018): the same
    layers with TensorFlow's "same" padding, so the maps are 21, 11 and 11 pixels square and the
    first linear layer takes 64 * 11 * 11 = 7,744 features; Glorot-uniform weights, zero biases."""

    def __init__(self, num_actions: int, history_length: int, frame_shape: tuple[int, ...]) -> None:
        super().__init__(num_actions, history_length, frame_shape)
        # "same" pads k - s pixels (k - size mod s where s does not divide the size), the odd
        # one after: 84 by (2, 2), 21 by (1, 2), 11 by (1, 1).
        self.features[0].padding = (2, 2)
        self.features.insert(2, nn.ZeroPad2d((1, 2, 1, 2)))  # (left, right, top, bottom)
        self.features[5].padding = (1, 1)
        self.features[8] = nn.Linear(64 * 11 * 11, 512)
        for layer in self.modules():
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)


class MinAtarQNetwork(nn.Module):
    """Q(s, ·) for MinAtar (Young & Tian 2019), as its `examples/dqn.py`: a 3×3 convolution of
    16 filters, ReLU, 128 ReLU units and a linear output per action, torch's initialisation.
    Its input, (B, history_length, C, 10, 10), is seen as history_length × C channels."""

    def __init__(self, num_actions: int, history_length: int, frame_shape: tuple[int, ...]) -> None:
        super().__init__()
        if len(frame_shape) != 3:
            raise ValueError(f"the MinAtar network takes (C, H, W) frames, not {frame_shape}")
        channels, height, width = frame_shape
        self.conv = nn.Conv2d(history_length * channels, 16, kernel_size=3, stride=1)
        self.hidden = nn.Linear(16 * (height - 2) * (width - 2), 128)
        self.output = nn.Linear(128, num_actions)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        grids = uint8_frames(self, frames).flatten(1, -3).float()
        # `self.conv` as one product of the 3×3 patches with the filters: the same function,
        # rounded differently, and faster on a CPU at this size (docs/benchmarks.md#minatar).
        patches = F.unfold(grids, self.conv.kernel_size).transpose(1, 2)
        features = torch.relu(F.linear(patches, self.conv.weight.flatten(1), self.conv.bias))
        hidden = torch.relu(self.hidden(features.transpose(1, 2).flatten(1)))
        return self.output(hidden)


NETWORKS = {
    "nature": NatureQNetwork,
    "nature_dqn": NatureDQNNetwork,
    "dopamine": DopamineQNetwork,
    "minatar": MinAtarQNetwork,
}


def build_network(
    name: str, num_actions: int, history_length: int, frame_shape: tuple[int, ...]
) -> nn.Module:
    """The network `name` for frames of `frame_shape`; a one-line ValueError names
    `agent.network` when there is no such network or it does not take these frames."""
    one_of(NETWORKS).check("agent.network", name)
    try:
        if num_actions < 1 or history_length < 1:
            raise ValueError(f"{num_actions} actions and {history_length} frames per state")
        return NETWORKS[name](num_actions, history_length, tuple(frame_shape))
    except ValueError as error:
        raise ValueError(f"agent.network={name} is not allowed here: {error}") from None


def uint8_frames(network: nn.Module, frames: torch.Tensor) -> torch.Tensor:
    """`frames`, which must be uint8: float pixels of 0..255 would be silently 255x too large."""
    if frames.dtype != torch.uint8:
        raise TypeError(f"{type(network).__name__} expects uint8 frames, got {frames.dtype}")
    return frames
