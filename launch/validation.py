"""Validation of a run's config as a whole, before anything is allocated or written: each
section through its schema (the one definition of its settings' types, defaults and rules:
`run_settings`), then what no schema sees alone, the rules across sections, and the sizes a
run's replay and files will have (what the machine must hold of them is checked by
`launch.run_guard` and `check_disk`). A refusal is one line naming the key and what is
allowed."""

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from agents.networks import build_network
from agents.settings import AgentSettings
from artifacts.upgrade import check_resumable
from envs.registry import environment_kind
from replay.buffer import memory_bytes
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


def replay_bytes(run: Run) -> int:
    """What a full replay of the config occupies in memory, and about what a checkpoint of
    it occupies on disk (its frames, and the per-slot arrays in the state file)."""
    frames_per_slot = storage_class(run.replay.eviction).frames_per_slot(run.agent.history_length)
    frame_shape = environment_kind(run.env.kind).frame_shape(run.env)
    return memory_bytes(run.replay.capacity, frame_shape, frames_per_slot)


# A state file holds the agent's networks and optimizer: the online and target networks and
# the two statistics of centered RMSProp, each the size of the network. A run's snapshots:
# agent_latest.pt and agent_best.pt (a network each) and agent_final.pt (all four).
STATE_NETWORKS, SNAPSHOT_NETWORKS = 4, 6
# The most actions a game has (ALE's full action set): a network's largest head.
MOST_ACTIONS = 18


def network_bytes(run: Run) -> int:
    """What one copy of the agent's network occupies (built without memory, on the meta
    device), with the largest head any game needs."""
    env = environment_kind(run.env.kind)
    with torch.device("meta"):
        network = build_network(
            run.agent.network, MOST_ACTIONS, run.agent.history_length, env.frame_shape(run.env)
        )
    return sum(p.numel() * p.element_size() for p in network.parameters())


def run_disk_bytes(run: Run, checkpoints: int | None = None) -> int:
    """About what a run's files occupy at most: `checkpoints` checkpoints (each a copy of the
    replay and a state file, whose networks dominate at small capacities; `checkpoint.keep`
    while it runs, one once it has finished) and its snapshots."""
    networks = network_bytes(run)
    state = replay_bytes(run) + STATE_NETWORKS * networks
    kept = run.checkpoint.keep if checkpoints is None else checkpoints
    return kept * state + SNAPSHOT_NETWORKS * networks


def size_text(count: int) -> str:
    return f"{count / 1e9:.1f} GB" if abs(count) >= 10**8 else f"{count / 1e6:.1f} MB"


def disk_needs(run: Run, checkpoints: Path) -> tuple[int, int, Path]:
    """What the run's files need on the disk of `checkpoints` beyond what its checkpoints
    already occupy (they overwrite it): while it runs and once it has finished
    (`run_disk_bytes`); and the nearest directory of that disk that exists."""
    # What the files occupy, not their length: a frame copy is sparse until the ring fills.
    files = checkpoints.iterdir() if checkpoints.is_dir() else ()
    existing = sum(path.stat().st_blocks * 512 for path in files)
    place = checkpoints
    while not place.exists():
        place = place.parent
    running, finished = (run_disk_bytes(run, kept) - existing for kept in (None, 1))
    return max(0, running), max(0, finished), place


def check_disk(run: Run, checkpoints: Path) -> None:
    """The run's files (`run_disk_bytes`) must fit on the disk of `checkpoints` (beside what
    its checkpoints already occupy, which they overwrite), before the first of them is due."""
    needed, _, place = disk_needs(run, checkpoints)
    free = shutil.disk_usage(place).free
    if needed > free:
        raise ValueError(
            f"checkpoint.keep={run.checkpoint.keep} is not allowed here: {run.checkpoint.keep} "
            f"checkpoints of replay.capacity={run.replay.capacity} and the agent's snapshots "
            f"need {size_text(needed)} more and {place} has {size_text(free)} free (lower "
            "either, or give hydra.run.dir on a larger disk)"
        )


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
