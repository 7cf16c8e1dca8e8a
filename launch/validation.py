"""Validation of a run's config as a whole, before anything is allocated or written: each
section through its schema (the one definition of its settings' types, defaults and rules:
`run_settings`), then what no schema sees alone, the rules across sections (what the machine
must give the run is checked by `launch.run_guard`). A refusal is one line naming the key and
what is allowed."""

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from agents.networks import build_network
from agents.settings import AgentSettings
from artifacts.upgrade import check_resumable
from envs.registry import environment_kind
from replay.registry import check_device_copy, sampler_class, storage_class
from replay.settings import CAPACITY
from replay.storage import FrameStorage
from schema import Settings, refusal, typed
from training.settings import (
    EVERY_FRAMES,
    CheckpointSettings,
    EvaluationSettings,
    Run,
    RunSettings,
    TrainSettings,
)

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
# Every section a run reads, and its schema: env and replay have one per kind.
SECTIONS: dict[str, Callable[[dict], type[Settings]]] = {
    "env": lambda values: environment_kind(values.get("kind")).settings,
    "replay": lambda values: sampler_class(values.get("kind")).settings,
    "agent": lambda values: AgentSettings,
    "train": lambda values: TrainSettings,
    "evaluation": lambda values: EvaluationSettings,
    "checkpoint": lambda values: CheckpointSettings,
}


def _check_sections(cfg: DictConfig) -> None:
    """Every section a run reads is there (a config group deleted with `~group` is not)."""
    for section in SECTIONS:
        if not isinstance(OmegaConf.select(cfg, section), DictConfig):
            groups = sorted(path.stem for path in (CONFIGS / section).glob("*.yaml"))
            choose = f": choose one with {section}=" + "|".join(groups) if groups else ""
            raise ValueError(f"the config has no {section} section{choose}")


def run_settings(cfg: DictConfig) -> Run:
    """Each section of `cfg` through its schema: a key no schema has, one that is missing or
    a value its rule refuses is a one-line ValueError."""
    _check_sections(cfg)
    plain = OmegaConf.to_container(cfg, resolve=True)
    sections = {
        name: typed(schema(plain[name]), plain[name], complete=True)
        for name, schema in SECTIONS.items()
    }
    top = {key: value for key, value in plain.items() if key not in SECTIONS}
    top = typed(RunSettings, top, complete=True)
    env = sections["env"]  # its game by its id, however env.game spelt it (a one-line refusal)
    sections["env"] = dataclasses.replace(env, game=environment_kind(env.kind).game_id(env.game))
    return Run(**vars(top), **sections)


def _check_across_sections(run: Run) -> None:
    """The rules that involve settings of several sections."""
    replay, train, agent = run.replay, run.train, run.agent
    smallest = max(train.batch_size, FrameStorage.smallest_capacity(agent.history_length))
    if replay.capacity < smallest:
        raise refusal("replay.capacity", replay.capacity, CAPACITY.allowed)
    every_frames = run.evaluation.every_frames
    if every_frames % run.env.frame_skip:
        raise refusal("evaluation.every_frames", every_frames, EVERY_FRAMES.allowed)


def _check_priority_range(run: Run) -> None:
    """Every priority p^α must be a positive, finite float: p lies in [ε, clip + ε], so a
    combination whose ε^α underflows to 0 or whose (clip + ε)^α overflows would leave the
    sum tree unable to draw."""
    r = run.replay
    if not hasattr(r, "priority_exponent"):
        return
    exponents = [r.priority_exponent, r.priority_exponent_final or r.priority_exponent]
    with np.errstate(all="ignore"):
        top = np.float64(run.agent.td_error_clip + r.priority_epsilon)
        smallest = min(np.float64(r.priority_epsilon) ** a for a in exponents)
        largest = max(top**a for a in exponents)
    if not (smallest >= np.finfo(np.float64).tiny and np.isfinite(largest * r.capacity)):
        raise ValueError(
            f"replay.priority_exponent={r.priority_exponent} with replay.priority_epsilon="
            f"{r.priority_epsilon} is not allowed: priorities p^α would underflow to 0 or "
            "overflow (p lies in [ε, agent.td_error_clip + ε])"
        )


def _check_network(run: Run) -> None:
    """The network must take the env's frames (built without memory, on the meta device)."""
    env = environment_kind(run.env.kind)
    with torch.device("meta"):
        build_network(run.agent.network, 1, run.agent.history_length, env.frame_shape(run.env))


def check_replay_group(cfg: DictConfig, group: str | None) -> None:
    """A fresh run's replay.kind must be the sampler of the replay group it composed: a kind
    set alone would run one sampler with another's α, β and step size."""
    if group is None:
        return
    kind = OmegaConf.select(cfg, "replay.kind")
    sampler_class(kind)
    if kind != group:
        raise ValueError(
            f"replay.kind={kind} is not allowed with replay={group}: choose the sampler and "
            f"its settings together with replay={kind}"
        )


def validate_config(cfg: DictConfig) -> Run:
    """The run's settings (`run_settings`) once every rule holds: bad settings are refused
    with one line naming the key, before anything is allocated. What depends on the machine
    the run runs on is left to `launch.run_guard`."""
    if OmegaConf.select(cfg, "resume") is not None:
        check_resumable(OmegaConf.to_container(cfg))
    run = run_settings(cfg)
    storage_class(run.replay.eviction)  # a storage the registry has
    _check_across_sections(run)
    _check_priority_range(run)
    _check_network(run)
    if run.replay.device != "cpu":  # a storage that can keep a copy of its frames there
        check_device_copy(run.replay.eviction, run.replay.device)
    return run
