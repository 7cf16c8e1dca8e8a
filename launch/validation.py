"""Validation of a run's config, before anything is allocated or written: each section by its
schema (`run_settings`), then the rules between sections (`check_across_sections`). What the
machine must give the run is `launch.run_guard`'s to check. A refusal is one line."""

import dataclasses
import typing
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from agents.networks import build_network
from artifacts.upgrade import check_resumable
from envs.registry import environment_kind
from replay.registry import sampler_class
from replay.settings import CAPACITY
from replay.storage import FrameStorage
from schema import Settings, refusal, typed
from training.settings import EVERY_FRAMES, Run, RunSettings

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
# The sections a run reads, each by its schema (`Run`'s): env's and replay's chosen by its kind.
SCHEMAS = {
    name: hint
    for name, hint in typing.get_type_hints(Run).items()
    if isinstance(hint, type) and issubclass(hint, Settings)
}
KINDS = {"env": environment_kind, "replay": sampler_class}


def run_settings(cfg: DictConfig) -> Run:
    """Each section of `cfg` read by its schema (`schema.typed`), or a one-line ValueError."""
    for section in SCHEMAS:  # a config group deleted with `~group` leaves none
        if not isinstance(OmegaConf.select(cfg, section), DictConfig):
            groups = sorted(path.stem for path in (CONFIGS / section).glob("*.yaml"))
            choose = f": choose one with {section}=" + "|".join(groups) if groups else ""
            raise ValueError(f"the config has no {section} section{choose}")
    plain = OmegaConf.to_container(cfg, resolve=True)
    sections = {}
    for name, schema in SCHEMAS.items():
        if name in KINDS:
            schema = KINDS[name](plain[name].get("kind")).settings
        sections[name] = typed(schema, plain[name], complete=True)
    top = {key: value for key, value in plain.items() if key not in SCHEMAS}
    top = typed(RunSettings, top, complete=True)
    env = sections["env"]  # its game by its id, however env.game spelt it (a one-line refusal)
    sections["env"] = dataclasses.replace(env, game=environment_kind(env.kind).game_id(env.game))
    return Run(**vars(top), **sections)


def check_across_sections(run: Run) -> None:
    """The rules between settings of several sections, which no schema sees alone."""
    replay, train, agent, env = run.replay, run.train, run.agent, run.env
    smallest = max(train.batch_size, FrameStorage.smallest_capacity(agent.history_length))
    if replay.capacity < smallest:
        raise refusal("replay.capacity", replay.capacity, CAPACITY.allowed)
    if run.evaluation.every_frames % env.frame_skip:
        raise refusal("evaluation.every_frames", run.evaluation.every_frames, EVERY_FRAMES.allowed)
    if agent.torch_compile and replay.priority_signal == "parameter_change":
        raise ValueError(
            "agent.torch_compile=true is not allowed with replay.priority_signal="
            "parameter_change: its per-sample gradients are computed eagerly"
        )
    if hasattr(replay, "priority_exponent"):
        # The sum tree draws from every p^α, p in [ε, clip + ε]: each a positive, finite float.
        alpha = replay.priority_exponent
        alphas = (alpha, replay.priority_exponent_final or alpha)
        ends = np.float64([replay.priority_epsilon, agent.td_error_clip + replay.priority_epsilon])
        with np.errstate(all="ignore"):
            smallest, largest = min(ends[0] ** a for a in alphas), max(ends[1] ** a for a in alphas)
        if not (smallest >= np.finfo(np.float64).tiny and np.isfinite(largest * replay.capacity)):
            raise ValueError(
                f"replay.priority_exponent={alpha} with replay.priority_epsilon="
                f"{replay.priority_epsilon} is not allowed: priorities p^α would underflow to 0 "
                "or overflow (p lies in [ε, agent.td_error_clip + ε])"
            )
    with torch.device("meta"):  # the network must take the env's frames (built in no memory)
        build_network(
            agent.network, 1, agent.history_length, environment_kind(env.kind).frame_shape(env)
        )


def validate_config(cfg: DictConfig) -> Run:
    """The run's settings (`run_settings`) once every rule holds, or a one-line ValueError."""
    if OmegaConf.select(cfg, "resume") is not None:
        check_resumable(OmegaConf.to_container(cfg))
    run = run_settings(cfg)
    check_across_sections(run)
    return run
