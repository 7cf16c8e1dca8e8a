"""A run's complete state between two steps, as plain data for a checkpoint, and back."""

import dataclasses
import os
from types import SimpleNamespace

import torch

from agents.updates import LearnStats, PendingLearn
from envs.registry import DEFAULT_KIND
from training.checkpoints import CheckpointError
from training.plain_config import select

# What a checkpoint must share with the config that resumes it: the shapes of what it stores.
IDENTITY_KEYS = (
    "env.kind",
    "env.game",
    "env.screen_size",
    "env.full_action_space",
    "agent.history_length",
    "replay.kind",
    "replay.capacity",
    "replay.eviction",  # the storage's layout (absent, None, in runs from before the key)
)


def run_identity(cfg: SimpleNamespace) -> dict:
    """The values of `IDENTITY_KEYS` in a run config (or a checkpoint's record of them)."""
    identity = {key: select(cfg, key) for key in IDENTITY_KEYS}
    identity["env.kind"] = identity["env.kind"] or DEFAULT_KIND  # runs from before env.kind
    return identity


def check_resumable(checkpoint: dict, cfg: SimpleNamespace) -> None:
    """One line, before anything is built, when the checkpoint belongs to another run (its
    replay kind, memory size, game...) and could not be loaded."""
    stored = checkpoint["state"].get("identity")
    if stored is None:  # written before checkpoints recorded it
        return
    stored = {"env.kind": DEFAULT_KIND, **stored}  # checkpoints from before env.kind
    for key, here in run_identity(cfg).items():
        if stored.get(key) != here:
            raise CheckpointError(
                f"checkpoint {checkpoint['path']} is of another run: {key} is "
                f"{stored.get(key)} there, {here} here"
            )


def capture_run_state(training) -> dict:
    """Everything `restore_run_state` needs to continue `training` exactly from this step,
    except the replay's frames (the checkpoint store copies those itself)."""
    parts = training.parts
    return {
        "identity": run_identity(training.cfg),
        "step": training.step,
        "episode_return": training.episode_return,
        "acting_state": parts.frame_stack.state,
        "env": parts.env.capture_state(),
        "agent": parts.agent.state_dict(),
        "replay": parts.replay.state_dict(),
        "rngs": {name: rng.bit_generator.state for name, rng in parts.rngs.items()},
        "torch_rng": torch.get_rng_state(),  # unused by training today; kept for exactness
        "torch_threads": torch.get_num_threads(),  # `threads: auto` resumes with it
        "learning": _learning_in_flight(training),
        "progress": training.progress.state_dict(),
        **training.periodic_test.state_dict(),  # its best score and pending tests
    }


def threads_run_with(checkpoint: dict | None) -> int | None:
    """The torch thread count of the run a checkpoint belongs to (None: a fresh run).
    Checkpoints from before the record ran `threads: auto` as OMP_NUM_THREADS where set, else
    half the cores (at most 8), which is what they resume with."""
    if checkpoint is None:
        return None
    recorded = checkpoint["state"].get("torch_threads")
    if recorded is not None:
        return int(recorded)
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, int(omp)) if omp.isdigit() else max(1, min(8, len(os.sched_getaffinity(0)) // 2))


def restore_run_state(training, state: dict) -> None:
    """The inverse of `capture_run_state`, except `progress` (restored once it exists)."""
    parts = training.parts
    training.step = int(state["step"])
    training.episode_return = float(state["episode_return"])
    training.periodic_test.load_state_dict(state)
    parts.frame_stack.load(state["acting_state"])
    parts.env.restore_state(state["env"])
    parts.agent.load_state_dict(state["agent"])
    parts.replay.load_state_dict(state["replay"])
    for name, rng in parts.rngs.items():
        rng.bit_generator.state = state["rngs"][name]
    torch.set_rng_state(state["torch_rng"])
    learning = state.get("learning")  # None: nothing in flight (always outside pipelined mode)
    if learning is not None:
        batch = SimpleNamespace(indices=learning["indices"], weights=learning["weights"])
        pending = PendingLearn.finished(LearnStats(**learning["stats"]))
        training.learning = (int(learning["step"]), batch, pending)


def _learning_in_flight(training) -> dict | None:
    """A pipelined run's update in flight, done but with its priorities still to be written:
    the resumed run writes them at the step the uninterrupted run does."""
    if training.learning is None:
        return None
    step, batch, stats = training.finished_learning()
    return {
        "step": step,
        "indices": batch.indices.copy(),
        "weights": batch.weights.copy(),
        "stats": dataclasses.asdict(stats),
    }
