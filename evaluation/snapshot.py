"""Agent snapshots: the online network plus what an evaluator needs to rebuild the agent.

One definition shared by the writer (train.py: best and latest agent) and the readers
(evaluate.py). A snapshot is a dict of tensors and plain values saved with ``torch.save``::

    {"format": "per-atari-agent", "version": 1, "online": <state_dict>, "num_actions": int,
     "history_length": int, "game": rom_id, "step": agent steps, "frames": emulator frames,
     "score": mean test score that made it the best, or None}

It loads with ``torch.load(weights_only=True)``: nothing in it can execute code.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from agents.double_dqn import DoubleDQN, resolve_device
from envs.games import resolve_game
from training.checkpoints import save_atomically

FORMAT = "per-atari-agent"
VERSION = 1
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


def save_agent_snapshot(
    path: str | os.PathLike,
    agent: DoubleDQN,
    *,
    game: str,
    step: int,
    frames: int,
    score: float | None,
) -> None:
    """Write ``agent``'s online network atomically: a reader sees the old file or the new one,
    never a half-written one."""
    path = Path(path)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "online": {k: v.detach().cpu() for k, v in agent.online.state_dict().items()},
        "num_actions": int(agent.num_actions),
        "history_length": int(agent.history_length),
        "game": resolve_game(game).rom_id,
        "step": int(step),
        "frames": int(frames),
        "score": None if score is None else float(score),
    }
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
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(
            f"agent snapshot {path} is corrupt or not a torch file: {reason}"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not an agent snapshot (format must be {FORMAT!r}; "
            "train.py's agent_final.pt/resume checkpoints are not snapshots)"
        )
    if payload.get("version") != VERSION:
        raise ValueError(
            f"agent snapshot {path} has version {payload.get('version')!r}; "
            f"this code reads version {VERSION}"
        )
    for key, kind in _REQUIRED.items():
        if not isinstance(payload.get(key), kind):
            raise ValueError(
                f"agent snapshot {path}: key {key!r} is missing or not {kind.__name__}"
            )
    score = payload.get("score")
    if score is not None and not (isinstance(score, float) and math.isfinite(score)):
        raise ValueError(f"agent snapshot {path}: key 'score' must be a finite float or None")
    return payload


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
    info = SnapshotInfo(
        path=Path(path),
        game=payload["game"],
        num_actions=payload["num_actions"],
        history_length=payload["history_length"],
        step=payload["step"],
        frames=payload["frames"],
        score=payload["score"],
    )
    return agent, info
