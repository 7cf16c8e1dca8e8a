"""Agent snapshots: the online network plus what an evaluator needs to rebuild the agent.

One definition shared by the writer (the training loop: latest, best and final agent) and the
readers (evaluate.py). A snapshot is a dict of tensors and plain values saved with
``torch.save``::

    {"format": "per-atari-agent", "version": 1, "online": <state_dict>, "num_actions": int,
     "history_length": int, "network": name, "frame_shape": [int, ...], "game": game id,
     "step": agent steps, "frames": emulator frames,
     "score": mean test score that made it the best, or None}

(Older snapshots are read as this version writes them: `artifacts.upgrade`.)

The final snapshot adds ``"target"`` and ``"optimizer"`` (``DoubleDQN.state_dict``'s), so
training can go on from it. It loads with ``torch.load(weights_only=True)``: nothing in it can
execute code.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from agents.double_dqn import DoubleDQN
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
        """The metadata of a payload that `read_snapshot` returned."""
        return cls(
            path=Path(path),
            game=payload["game"],
            num_actions=payload["num_actions"],
            history_length=payload["history_length"],
            step=payload["step"],
            frames=payload["frames"],
            score=payload.get("score"),
        )


def _payload(agent: DoubleDQN, game: str, step: int, frames: int, score: float | None) -> dict:
    return {
        **SNAPSHOT.fields(),
        # state_dict() waits for an update in flight (pipelined mode) before reading.
        "online": {k: v.detach().cpu() for k, v in agent.state_dict()["online"].items()},
        "num_actions": int(agent.num_actions),
        "history_length": int(agent.history_length),
        "network": agent.network,
        "frame_shape": [int(size) for size in agent.frame_shape],
        "game": game,
        "step": int(step),
        "frames": int(frames),
        "score": None if score is None else float(score),
    }


def _save(path: str | os.PathLike, payload: dict) -> None:
    """A reader sees the old file or the new one, never a half-written one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_atomically(path, payload)


def save_agent_snapshot(
    path: str | os.PathLike,
    agent: DoubleDQN,
    *,
    game: str,
    step: int,
    frames: int,
    score: float | None,
) -> None:
    """Write ``agent``'s online network and its metadata atomically."""
    _save(path, _payload(agent, game, step, frames, score))


def save_final_snapshot(
    path: str | os.PathLike, agent: DoubleDQN, *, game: str, step: int, frames: int
) -> None:
    """The agent at the end of training: a snapshot (unevaluated, so ``score`` is None) with
    the target network and the optimizer state besides."""
    state = agent.state_dict()
    payload = _payload(agent, game, step, frames, score=None)
    _save(path, {**payload, "target": state["target"], "optimizer": state["optimizer"]})


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
