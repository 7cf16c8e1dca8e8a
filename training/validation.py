"""Validation of a run's config: every bad setting is one line naming the key and what is
allowed, raised before anything is allocated or written."""

import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from agents.devices import resolve_device
from agents.networks import NETWORKS, build_network
from agents.optimizer import OPTIMIZERS
from agents.targets import TARGET_RULES
from envs.registry import environment_kind
from replay.buffer import memory_bytes
from replay.priorities import WEIGHT_NORMALIZATIONS
from replay.priority_signals import PRIORITY_SIGNALS
from replay.registry import SAMPLERS, STORAGES, storage_class

LIFE_LOSS_RULES = ("new_episode", "stop_bootstrap")
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
POSITIVE_INTEGERS = (
    "train.total_steps",
    "train.batch_size",
    "train.update_period_steps",
    "train.target_update_period_steps",
    "train.log_period_steps",
    "train.priority_histogram_period_steps",
    "checkpoint.every_steps",
    "agent.history_length",
)
NON_NEGATIVE_INTEGERS = ("train.epsilon_decay_steps",)
SEED_LIMIT = 2**63  # torch's and numpy's seeds are signed 64-bit integers
SECTIONS = ("env", "agent", "replay", "train", "evaluation", "checkpoint")
MACHINE_KEYS = ("threads", "replay.device")  # allowed values depend on the machine's cores, GPUs

FRACTIONS = (
    "train.epsilon_start",
    "train.epsilon_final",
    "replay.importance_exponent",
    "replay.importance_exponent_final",
    "agent.discount",
)
POSITIVE_NUMBERS = (
    "agent.learning_rate",
    "agent.rmsprop_epsilon",
    "agent.td_error_clip",
)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return (_integer(value) or isinstance(value, float)) and math.isfinite(value)


def _positive_integer(value) -> bool:
    return _integer(value) and value > 0


def _non_negative_integer(value) -> bool:
    return _integer(value) and value >= 0


def _fraction(value) -> bool:
    return _number(value) and 0 <= value <= 1


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def _positive_number(value) -> bool:
    return _number(value) and value > 0


def _none_or(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or test(value)


def _learners_cuda_device(name, cfg: DictConfig) -> bool:
    """The replay's frames may sit on the learner's GPU (the frame ring only)."""
    try:
        device = resolve_device(name)
        fifo = cfg.replay.get("eviction", "fifo") == "fifo"
        return device.type == "cuda" and device == resolve_device(cfg.agent.device) and fifo
    except ValueError:  # not a device name, or no such GPU
        return False


def _rules(cfg: DictConfig) -> list[tuple[str, str, Callable[[object], bool]]]:
    """(key, what is allowed, test of the value) in checking order; a test may rely on the
    keys checked before it."""
    t = cfg.train
    rules = [(key, "a positive integer", _positive_integer) for key in POSITIVE_INTEGERS]
    rules += [(key, "an integer >= 0", _non_negative_integer) for key in NON_NEGATIVE_INTEGERS]
    rules += [(key, "in [0, 1]", _fraction) for key in FRACTIONS]
    rules += [(key, "a number > 0", _positive_number) for key in POSITIVE_NUMBERS]
    rules.append(
        (
            "replay.importance_exponent_final",
            "at least replay.importance_exponent (β rises to it) and at most 1",
            lambda v: v >= cfg.replay.importance_exponent,
        )
    )
    rules += [
        (
            "replay.capacity",
            "at least train.batch_size and agent.history_length + 2, an integer",
            lambda v: _integer(v) and v >= max(t.batch_size, cfg.agent.history_length + 2),
        ),
        (
            "train.learning_start_steps",
            "an integer from train.batch_size to train.total_steps (a run with no update)",
            lambda v: _integer(v) and t.batch_size <= v <= t.total_steps,
        ),
        (
            "checkpoint.keep",
            "an integer >= 2 (a complete checkpoint must survive a failed save)",
            lambda v: _integer(v) and v >= 2,
        ),
        (
            "replay.weight_normalization",
            f"one of {', '.join(WEIGHT_NORMALIZATIONS)}",
            lambda v: v in WEIGHT_NORMALIZATIONS,
        ),
        (
            "train.life_loss",
            f"one of {', '.join(LIFE_LOSS_RULES)}",
            lambda v: v in LIFE_LOSS_RULES,
        ),
        ("agent.rmsprop_decay", "in [0, 1)", lambda v: _number(v) and 0 <= v < 1),
        ("agent.network", f"one of {', '.join(NETWORKS)}", lambda v: v in NETWORKS),
        ("agent.target_rule", f"one of {', '.join(TARGET_RULES)}", lambda v: v in TARGET_RULES),
        ("agent.optimizer", f"one of {', '.join(OPTIMIZERS)}", lambda v: v in OPTIMIZERS),
        ("train.reward_clip", "null (no clipping) or a number > 0", _none_or(_positive_number)),
        ("env.game", "a game name", lambda v: isinstance(v, str)),
        (
            "threads",
            f"auto or an integer from 1 to {_cores()} (the cores this process may use)",
            lambda v: v == "auto" or _positive_integer(v) and v <= _cores(),
        ),
        (
            "seed",
            f"an integer from 0 to {SEED_LIMIT - 1}",
            lambda v: _integer(v) and 0 <= v < SEED_LIMIT,
        ),
        ("agent.device", "a device name", lambda v: isinstance(v, str)),
        ("agent.pipelined", "true or false", lambda v: isinstance(v, bool)),
        ("agent.cuda_graphs", "true or false", lambda v: isinstance(v, bool)),
        ("evaluation.worker", "true or false", lambda v: isinstance(v, bool)),
        (
            "evaluation.every_frames",
            "a positive multiple of env.frame_skip",
            lambda v: _positive_integer(v) and v % cfg.env.frame_skip == 0,
        ),
        ("evaluation.frames", "a positive integer", _positive_integer),
        ("evaluation.epsilon", "in [0, 1]", _fraction),
        (
            "replay.importance_exponent_final_step",
            "null (the last step) or a positive integer",
            _none_or(_positive_integer),
        ),
    ]
    # Keys only some samplers have, or that runs stored before them lack: checked where the
    # replay config holds them.
    optional = [
        (
            "replay.priority_signal",
            f"one of {', '.join(PRIORITY_SIGNALS)}",
            lambda v: v in PRIORITY_SIGNALS,
        ),
        ("replay.eviction", f"one of {', '.join(STORAGES)}", lambda v: v in STORAGES),
        (
            "replay.device",
            "cpu, or agent.device's CUDA device with replay.eviction=fifo",
            lambda v: v == "cpu" or _learners_cuda_device(v, cfg),
        ),
        ("replay.priority_exponent", ">= 0", lambda v: _number(v) and v >= 0),
        (
            "replay.priority_exponent_final",
            "null or >= 0",
            lambda v: v is None or _number(v) and v >= 0,
        ),
        ("replay.priority_exponent_period_steps", "a positive integer", _positive_integer),
        ("replay.priority_epsilon", "> 0", _positive_number),
        ("replay.resort_period", "a positive integer", _positive_integer),
    ]
    # Each env kind has its own settings (its config file's keys).
    optional += [
        ("env.frame_skip", "a positive integer", _positive_integer),
        ("env.noop_max", "an integer >= 0", _non_negative_integer),
        ("env.max_episode_frames", "an integer >= 0", _non_negative_integer),
        ("env.repeat_action_probability", "in [0, 1]", _fraction),
        ("env.screen_size", "a positive integer", _positive_integer),
        ("env.full_action_space", "true or false", lambda v: isinstance(v, bool)),
        ("env.difficulty_ramping", "true or false", lambda v: isinstance(v, bool)),
    ]
    present = {"replay": cfg.replay, "env": cfg.env}
    rules += [rule for rule in optional if rule[0].split(".")[1] in present[rule[0].split(".")[0]]]
    return rules


def known_keys(replay_kind: str, env_kind: str = "atari") -> dict[str, set[str]]:
    """The settings a run may have, per config section, read from the config files: a key in
    none of them (misspelt, or added with `+`) would otherwise be stored and ignored."""
    root = OmegaConf.load(CONFIGS / "config.yaml")
    known = {section: set(root[section]) for section in ("train", "evaluation", "checkpoint")}
    known["agent"] = {
        key for path in (CONFIGS / "agent").glob("*.yaml") for key in OmegaConf.load(path)
    }
    known["env"] = set(OmegaConf.load(CONFIGS / "env" / f"{env_kind}.yaml"))
    known["replay"] = set(OmegaConf.load(CONFIGS / "replay" / f"{replay_kind}.yaml").replay)
    known[""] = {"seed", "resume", "threads", *known}
    return known


def _check_known_keys(cfg: DictConfig) -> None:
    known = known_keys(cfg.replay.kind, cfg.env.get("kind", "atari"))
    for section, allowed in known.items():
        keys = cfg if section == "" else cfg[section]
        for key in keys:
            if key not in allowed:
                name = f"{section}.{key}".lstrip(".")
                raise ValueError(
                    f"{name} is not a setting; {section or 'the config'} has: "
                    f"{', '.join(sorted(allowed))}"
                )


def available_memory_bytes() -> int:
    """Memory the system can give this process without swapping (Linux: MemAvailable)."""
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def replay_bytes(cfg: DictConfig) -> int:
    """What a full replay of the config occupies in memory, and about what a checkpoint of
    it occupies on disk (its frames, and the per-slot arrays in the state file)."""
    # Runs stored before `replay.eviction` existed forget first in, first out.
    storage = storage_class(cfg.replay.get("eviction", "fifo"))
    frames_per_slot = storage.frames_per_slot(cfg.agent.history_length)
    frame_shape = environment_kind(cfg.env.get("kind")).frame_shape(cfg.env)
    return memory_bytes(cfg.replay.capacity, frame_shape, frames_per_slot)


def _check_memory(cfg: DictConfig) -> None:
    needed, available = replay_bytes(cfg), available_memory_bytes()
    if needed > available:
        raise ValueError(
            f"replay.capacity={cfg.replay.capacity} is not allowed: a full replay needs "
            f"{needed / 1e9:.1f} GB and this machine has {available / 1e9:.1f} GB available"
        )


def check_disk(cfg: DictConfig, checkpoints: Path) -> None:
    """The run's `checkpoint.keep` checkpoints must fit on the disk of `checkpoints` (beside
    what its checkpoints already occupy, which they overwrite), before the first of them
    is due."""
    existing = sum(p.stat().st_size for p in checkpoints.iterdir()) if checkpoints.is_dir() else 0
    needed = cfg.checkpoint.keep * replay_bytes(cfg) - existing
    place = checkpoints
    while not place.exists():
        place = place.parent
    free = shutil.disk_usage(place).free
    if needed > free:
        raise ValueError(
            f"checkpoint.keep={cfg.checkpoint.keep} is not allowed here: {cfg.checkpoint.keep} "
            f"checkpoints of replay.capacity={cfg.replay.capacity} need {needed / 1e9:.1f} GB "
            f"more and {place} has {free / 1e9:.1f} GB free (lower either, or give "
            "hydra.run.dir on a larger disk)"
        )


def _check_priority_range(cfg: DictConfig) -> None:
    """Every priority p^α must be a positive, finite float: p lies in [ε, clip + ε], so a
    combination whose ε^α underflows to 0 or whose (clip + ε)^α overflows would leave the
    sum tree unable to draw."""
    r = cfg.replay
    if "priority_epsilon" not in r or "priority_exponent" not in r:
        return
    exponents = [r.priority_exponent, r.get("priority_exponent_final") or r.priority_exponent]
    with np.errstate(all="ignore"):
        top = np.float64(cfg.agent.td_error_clip + r.priority_epsilon)
        smallest = min(np.float64(r.priority_epsilon) ** a for a in exponents)
        largest = max(top**a for a in exponents)
    if not (smallest >= np.finfo(np.float64).tiny and np.isfinite(largest * r.capacity)):
        raise ValueError(
            f"replay.priority_exponent={r.priority_exponent} with replay.priority_epsilon="
            f"{r.priority_epsilon} is not allowed: priorities p^α would underflow to 0 or "
            "overflow (p lies in [ε, agent.td_error_clip + ε])"
        )


def _check_network(cfg: DictConfig) -> None:
    """The network must take the env's frames (built without memory, on the meta device)."""
    env = environment_kind(cfg.env.get("kind"))
    with torch.device("meta"):
        build_network(cfg.agent.network, 1, cfg.agent.history_length, env.frame_shape(cfg.env))


def _check_sections(cfg: DictConfig) -> None:
    """Every section a run reads is there (a config group deleted with `~group` is not)."""
    for section in SECTIONS:
        if not isinstance(OmegaConf.select(cfg, section), DictConfig):
            groups = sorted(path.stem for path in (CONFIGS / section).glob("*.yaml"))
            choose = f": choose one with {section}=" + "|".join(groups) if groups else ""
            raise ValueError(f"the config has no {section} section{choose}")


def check_replay_group(cfg: DictConfig, group: str | None) -> None:
    """A fresh run's replay.kind must be the sampler of the replay group it composed: a kind
    set alone would run one sampler with another's α, β and step size."""
    kind = cfg.replay.kind
    if group is not None and kind != group:
        raise ValueError(
            f"replay.kind={kind} is not allowed with replay={group}: choose the sampler and "
            f"its settings together with replay={kind}"
        )


def validate_config(cfg: DictConfig, this_machine: bool = True) -> None:
    """Reject bad settings with one line naming the key, before anything is allocated.
    `this_machine=False` checks a config that will run elsewhere (a sweep's job on a cluster):
    what depends on the machine (its cores, GPUs and memory) is left to the run itself."""
    _check_sections(cfg)
    kind = OmegaConf.select(cfg, "replay.kind")
    if kind not in SAMPLERS:
        raise ValueError(f"replay.kind={kind} is not allowed: must be one of {', '.join(SAMPLERS)}")
    environment_kind(cfg.env.get("kind"))
    _check_known_keys(cfg)
    for key, allowed, test in _rules(cfg):
        if not this_machine and key in MACHINE_KEYS:
            continue
        value = OmegaConf.select(cfg, key)
        if not test(value):
            raise ValueError(f"{key}={value} is not allowed: must be {allowed}")
    _check_priority_range(cfg)
    environment_kind(cfg.env.get("kind")).game_id(cfg.env.game)
    _check_network(cfg)
    if not this_machine:
        return
    if resolve_device(cfg.agent.device).type != "cuda" and cfg.agent.pipelined:
        # On a CPU acting and the update compete for the same cores: pipelining only costs.
        raise ValueError("agent.pipelined=true needs agent.device=cuda")
    _check_memory(cfg)
