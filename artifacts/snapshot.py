"""Agent snapshots, written by the training loop (latest, best and final agent) and read by
evaluate.py: a ``torch.save`` dict of tensors and plain values, which loads with
``torch.load(weights_only=True)`` (nothing in it can run code). It holds the online network and
what rebuilds the agent around it (`save_agent_snapshot`); the final snapshot adds ``"target"`` and
``"optimizer"``, so training can go on from it. Older snapshots are read as this version writes
them (`artifacts.upgrade`). `load_agent_snapshot` rebuilds one as the policy that plays it: the
saved network, ε-greedy, without a learner or an optimizer.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from agents.double_dqn import DoubleDQN
from agents.networks import build_network
from agents.policy import EpsilonGreedy, resolve_device
from artifacts.header import Header
from artifacts.tensor_tree import save_atomically
from artifacts.upgrade import upgrade_snapshot

SNAPSHOT = Header("per-atari-agent", 1, "agent snapshot")
_REQUIRED = {
    "online": dict,
    "num_actions": int,
    "history_length": int,
    "game": str,
    "step": int,
    "frames": int,
}


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot's metadata. ``score`` is None when it was saved without an evaluation."""

    path: Path
    game: str  # ale-py ROM id
    num_actions: int
    history_length: int
    step: int
    frames: int
    score: float | None

    @classmethod
    def of(cls, path: str | os.PathLike, payload: dict) -> SnapshotInfo:
        metadata = {field.name: payload.get(field.name) for field in fields(cls)[1:]}
        return cls(path=Path(path), **metadata)


def save_agent_snapshot(
    path: str | os.PathLike,
    agent: DoubleDQN,
    *,
    game: str,
    step: int,
    frames: int,
    score: float | None = None,
    final: bool = False,
) -> None:
    """The online network and what rebuilds the agent around it; `final` (the agent at the end
    of training, unevaluated) adds its target network and optimizer."""
    state = agent.state_dict()  # waits for an update in flight (pipelined mode) before reading
    payload = {
        **SNAPSHOT.fields(),
        "online": {k: v.detach().cpu() for k, v in state["online"].items()},
        "num_actions": int(agent.num_actions),
        "history_length": int(agent.history_length),
        "network": agent.network,
        "frame_shape": [int(size) for size in agent.frame_shape],
        "game": game,
        "step": int(step),
        "frames": int(frames),
        "score": None if score is None else float(score),
    }
    if final:
        payload |= {"target": state["target"], "optimizer": state["optimizer"]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_atomically(path, payload)


def read_snapshot(path: str | os.PathLike, device: str | torch.device = "cpu") -> dict:
    """The validated payload dict; one-line ValueError for a missing, corrupt or foreign file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"agent snapshot {path} does not exist")
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # torch raises many types for truncated or foreign files
        # Not torch's own text: it advises reloading with weights_only=False (running code).
        raise ValueError(
            f"{path} is not an agent snapshot: it is truncated, corrupt or another kind of "
            f"file ({type(error).__name__})"
        ) from None
    SNAPSHOT.check(path, payload)
    for key, kind in _REQUIRED.items():
        if not isinstance(payload.get(key), kind):
            raise ValueError(
                f"agent snapshot {path}: key {key!r} is missing or not {kind.__name__}"
            )
    score = payload.get("score")
    if score is not None and not (isinstance(score, float) and math.isfinite(score)):
        raise ValueError(f"agent snapshot {path}: key 'score' must be a finite float or None")
    return upgrade_snapshot(payload)


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
