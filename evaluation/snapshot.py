"""An agent snapshot (the file format: `artifacts.snapshot`) rebuilt as an agent to evaluate."""

from __future__ import annotations

import os

import numpy as np
import torch

from agents.double_dqn import DoubleDQN, resolve_device
from artifacts.snapshot import SnapshotInfo, read_snapshot


def frame_shape_of(payload: dict) -> tuple[int, ...]:
    """The shape of one frame the snapshot's network takes (a `read_snapshot` payload)."""
    # Snapshots from before "frame_shape" hold the Nature network on 84x84 frames.
    return tuple(payload.get("frame_shape", (84, 84)))


def load_agent_snapshot(
    path: str | os.PathLike, device: str | torch.device = "cpu"
) -> tuple[DoubleDQN, SnapshotInfo]:
    """Rebuild a DoubleDQN (online = target = the saved network; optimizer fresh and unused)
    and the snapshot's metadata. ``device`` is a torch device or an `agent.device` setting
    ('auto', 'cpu', 'cuda:N'). Acting needs an explicit ``rng`` (``act(..., rng=...)``); the
    agent's own generator is a fixed dummy because a snapshot carries no training stream."""
    device = resolve_device(str(device))
    payload = read_snapshot(path, device)
    agent = DoubleDQN(
        payload["num_actions"],
        rng=np.random.default_rng(0),
        device=str(device),
        history_length=payload["history_length"],
        network=payload.get("network", "nature"),
        frame_shape=frame_shape_of(payload),
    )
    try:
        agent.online.load_state_dict(payload["online"])
    except RuntimeError as error:
        first = str(error).strip().splitlines()[0]
        raise ValueError(
            f"agent snapshot {path}: weights do not fit the network: {first}"
        ) from None
    agent.sync_target()
    agent.online.eval()
    return agent, SnapshotInfo.of(path, payload)
