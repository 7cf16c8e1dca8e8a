"""A run's complete state between two steps, as plain data for a checkpoint, and back."""

import dataclasses
from types import SimpleNamespace

import torch

from agents.updates import LearnStats, PendingLearn
from artifacts.upgrade import upgrade_checkpoint_state
from envs.registry import ENVIRONMENTS
from replay.registry import SAMPLERS
from training.checkpoints import CheckpointError
from training.settings import (
    AgentSettings,
    CheckpointSettings,
    EvaluationSettings,
    Run,
    RunSettings,
    TrainSettings,
)


def select(settings, key: str):
    """The value at a dotted `key` of a run's settings, or None where they have no such key
    (a uniform replay has no `replay.priority_exponent`)."""
    for part in key.split("."):
        settings = getattr(settings, part, None)
    return settings


SCHEMAS = (
    *(kind.settings for kind in ENVIRONMENTS.values()),
    AgentSettings,
    *(sampler.settings for sampler in SAMPLERS.values()),
    TrainSettings,
    EvaluationSettings,
    CheckpointSettings,
    RunSettings,
)


def marked(mark: str) -> tuple[str, ...]:
    """The keys of the run's settings whose declaration carries `mark` (`schema.setting`),
    once each, in the order of `SCHEMAS`."""
    keys = (
        schema.key(field.name)
        for schema in SCHEMAS
        for field in dataclasses.fields(schema)
        if mark in field.metadata["marks"]
    )
    return tuple(dict.fromkeys(keys))


# What a checkpoint must share with the config that resumes it: the shapes of what it stores.
IDENTITY_KEYS = marked("identity")


def run_identity(cfg: Run) -> dict:
    """The values of `IDENTITY_KEYS` in a run config (or a checkpoint's record of them)."""
    return {key: select(cfg, key) for key in IDENTITY_KEYS}


def resumable(checkpoint: dict, cfg: Run) -> dict:
    """The checkpoint, its state as this version writes it (`artifacts.upgrade`); one line,
    before anything is built, when it belongs to another run (its replay kind, memory size,
    game...) and could not be loaded."""
    here = run_identity(cfg)
    stored = upgrade_checkpoint_state(checkpoint["state"], here)["identity"]
    for key, value in here.items():
        if stored.get(key) != value:
            raise CheckpointError(
                f"checkpoint {checkpoint['path']} is of another run: {key} is "
                f"{stored.get(key)} there, {value} here"
            )
    return checkpoint


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
        # The next step's action where it was chosen behind an update: the agent's generator
        # has drawn it already, so the resumed run must take it, not choose again.
        "next_action": training.next_action,
        "progress": training.progress.state_dict(),
        **training.record.state_dict(),  # the config it runs with, the changes since its start
        **training.periodic_test.state_dict(),  # its best score and pending tests
    }


def threads_run_with(checkpoint: dict | None) -> int | None:
    """The torch thread count a `resumable` checkpoint's run ran with (None: a fresh run)."""
    return None if checkpoint is None else int(checkpoint["state"]["torch_threads"])


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
    training.next_action = state["next_action"]
    learning = state["learning"]  # None: nothing in flight (always outside pipelined mode)
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
