"""An agent snapshot (the file format: `artifacts.snapshot`) rebuilt as the policy that plays
it: the saved network, ε-greedy, without a learner or an optimizer."""

from __future__ import annotations

import os

import torch

from agents.networks import build_network
from agents.policy import EpsilonGreedy, resolve_device
from artifacts.snapshot import SnapshotInfo, read_snapshot


def load_agent_snapshot(
    path: str | os.PathLike, device: str | torch.device = "cpu", cuda_graphs: bool = False
) -> tuple[EpsilonGreedy, SnapshotInfo]:
    """The snapshot's network as an ε-greedy policy in eval mode, and its metadata. The policy
    has no random stream (a snapshot carries none): ``act`` needs ``rng=``."""
    device = resolve_device(str(device))
    payload = read_snapshot(path, device)
    num_actions, history_length = payload["num_actions"], payload["history_length"]
    # The initial weights are overwritten at once: no generator of anyone's is drawn from.
    with torch.random.fork_rng(devices=[]):
        network = build_network(
            payload["network"], num_actions, history_length, tuple(payload["frame_shape"])
        )
    try:
        network.load_state_dict(payload["online"])
    except RuntimeError as error:
        first = str(error).strip().splitlines()[0]
        raise ValueError(
            f"agent snapshot {path}: weights do not fit the network: {first}"
        ) from None
    network.to(device).eval().requires_grad_(False)
    policy = EpsilonGreedy(network, device, num_actions, history_length, cuda_graphs=cuda_graphs)
    return policy, SnapshotInfo.of(path, payload)
