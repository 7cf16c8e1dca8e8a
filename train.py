"""Train Double DQN with uniform, rank-based or proportional experience replay on one Atari game.

    python train.py                                  # the paper's run: Pong, uniform replay
    python train.py replay=proportional env.game=breakout
    python train.py experiment=demo                 # a few minutes on a CPU
    python train.py resume=runs/pong/uniform/<date>  # continue from its last checkpoint

This file validates the config and builds the components; `training.loop` runs them.
"""

import signal
import sys
from pathlib import Path

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from agents.double_dqn import DoubleDQN, resolve_device
from envs.atari import make_env
from envs.frame_stack import FrameStack
from envs.games import resolve_game
from replay.buffer import ReplayBuffer
from replay.priorities import WEIGHT_NORMALIZATIONS
from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import Sampler, UniformSampler
from replay.storage import FrameStorage
from training.checkpoints import CheckpointError, CheckpointStore
from training.loop import Components, StopRequest, Training

# `hydra.run.dir` is the resumed run's directory when `resume` is set.
OmegaConf.register_new_resolver(
    "or_else", lambda value, default: default if value is None else value
)

REPLAY_KINDS = ("uniform", "proportional", "rank_based")


def validate_config(cfg: DictConfig) -> None:
    """Reject bad settings with one line naming the key, before anything is allocated."""
    train, replay = cfg.train, cfg.replay
    if replay.kind not in REPLAY_KINDS:
        raise ValueError(
            f"replay.kind={replay.kind} is not allowed: must be one of {', '.join(REPLAY_KINDS)}"
        )
    checks = [
        (replay.capacity >= train.batch_size, "replay.capacity", "at least train.batch_size"),
        (
            train.learning_start_steps >= train.batch_size,
            "train.learning_start_steps",
            "at least train.batch_size",
        ),
        (train.batch_size > 0, "train.batch_size", "a positive integer"),
        (train.total_steps > 0, "train.total_steps", "a positive integer"),
        (train.update_period_steps > 0, "train.update_period_steps", "a positive integer"),
        (
            train.target_update_period_steps > 0,
            "train.target_update_period_steps",
            "a positive integer",
        ),
        (train.log_period_steps > 0, "train.log_period_steps", "a positive integer"),
        (cfg.checkpoint.every_steps > 0, "checkpoint.every_steps", "a positive integer"),
        (cfg.checkpoint.keep > 0, "checkpoint.keep", "a positive integer"),
        (0.0 <= train.epsilon_start <= 1.0, "train.epsilon_start", "in [0, 1]"),
        (0.0 <= train.epsilon_final <= 1.0, "train.epsilon_final", "in [0, 1]"),
        (
            replay.weight_normalization in WEIGHT_NORMALIZATIONS,
            "replay.weight_normalization",
            f"one of {', '.join(WEIGHT_NORMALIZATIONS)}",
        ),
        (0.0 <= replay.importance_exponent <= 1.0, "replay.importance_exponent", "in [0, 1]"),
        (
            0.0 <= replay.importance_exponent_final <= 1.0,
            "replay.importance_exponent_final",
            "in [0, 1]",
        ),
    ]
    if replay.kind != "uniform":
        checks.append((replay.priority_exponent >= 0, "replay.priority_exponent", ">= 0"))
        checks.append((replay.priority_epsilon > 0, "replay.priority_epsilon", "> 0"))
    for ok, key, allowed in checks:
        if not ok:
            raise ValueError(
                f"{key}={OmegaConf.select(cfg, key)} is not allowed: must be {allowed}"
            )
    resolve_game(cfg.env.game)
    resolve_device(cfg.agent.device)


def build_sampler(replay: DictConfig, rng: np.random.Generator) -> Sampler:
    if replay.kind == "uniform":
        return UniformSampler(replay.capacity, rng)
    prioritized = dict(
        priority_exponent=replay.priority_exponent, priority_epsilon=replay.priority_epsilon
    )
    if replay.kind == "proportional":
        return ProportionalSampler(replay.capacity, rng, **prioritized)
    return RankBasedSampler(replay.capacity, rng, **prioritized, resort_period=replay.resort_period)


def build(cfg: DictConfig) -> Components:
    """Construct every component from the config with plain constructor calls."""
    agent_seed, sampler_seed, env_seed = np.random.SeedSequence(cfg.seed).generate_state(3)
    torch.manual_seed(cfg.seed)
    rngs = {
        "agent": np.random.default_rng(agent_seed),
        "sampler": np.random.default_rng(sampler_seed),
    }
    env = make_env(seed=int(env_seed), **cfg.env)
    agent = DoubleDQN(env.action_space.n, rng=rngs["agent"], **cfg.agent)
    storage = FrameStorage(
        cfg.replay.capacity, cfg.agent.history_length, (cfg.env.screen_size,) * 2
    )
    sampler = build_sampler(cfg.replay, rngs["sampler"])
    replay = ReplayBuffer(storage, sampler, cfg.train.batch_size, cfg.replay.weight_normalization)
    frame_stack = FrameStack(cfg.agent.history_length, (cfg.env.screen_size,) * 2)
    return Components(env, agent, replay, frame_stack, int(env_seed), rngs)


class RunDirectoryError(ValueError):
    """The run directory holds another run."""


def claim_run_directory(run_dir: Path, cfg: DictConfig) -> None:
    """Write the resolved config, or check that the directory's run has the same one."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.pop("resume", None)
    path = run_dir / "config.yaml"
    if not path.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(OmegaConf.to_yaml(resolved))
        return
    existing = OmegaConf.to_container(OmegaConf.load(path))
    existing.pop("resume", None)
    differences = _differences(existing, resolved)
    if differences:
        key, (there, here) = next(iter(differences.items()))
        raise RunDirectoryError(
            f"run directory {run_dir} holds a different run: {key} is {there} there, {here} here"
        )


def _plain(value):
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _differences(a, b, prefix: str = "") -> dict:
    if isinstance(a, dict) and isinstance(b, dict):
        found = {}
        for key in sorted(set(a) | set(b)):
            found.update(_differences(a.get(key), b.get(key), f"{prefix}{key}."))
        return found
    return {} if a == b else {prefix.rstrip("."): (a, b)}


def run_config(cfg: DictConfig) -> DictConfig:
    """The config to run: `cfg`, or with `resume` the resumed run's own, which every
    command-line override must agree with."""
    if cfg.resume is None:
        return cfg
    path = Path(cfg.resume) / "config.yaml"
    if not path.is_file():
        raise RunDirectoryError(f"resume={cfg.resume} is not a run directory: no {path.name}")
    stored = OmegaConf.load(path)
    for override in HydraConfig.get().overrides.task:
        key = override.split("=", 1)[0].lstrip("+~")
        if key == "resume" or key.startswith("hydra"):
            continue
        there, here = (_plain(OmegaConf.select(c, key)) for c in (stored, cfg))
        if there != here:
            raise RunDirectoryError(
                f"resume={cfg.resume}: the run has {key}={there}; a resumed run keeps its config"
            )
    stored.resume = cfg.resume
    return stored


@hydra.main(version_base="1.3", config_path="configs", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        cfg = run_config(cfg)
        validate_config(cfg)
        claim_run_directory(run_dir, cfg)
        checkpoints = CheckpointStore(run_dir / "checkpoints", cfg.checkpoint.keep)
        checkpoint = checkpoints.read_latest()
    except (ValueError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    parts = build(cfg)
    stop = StopRequest()
    stop.install()
    training = Training(parts, cfg, run_dir, checkpoints, stop)
    try:
        training.start(checkpoint)
        stopped_by = training.run()
    finally:
        parts.env.close()
    if stopped_by is not None:
        print(
            f"stopped by {signal.Signals(stopped_by).name} at step {training.step}; "
            f"resume with: python train.py resume={run_dir}",
            file=sys.stderr,
        )
        # 0 after SIGTERM, so schedulers treat the preempted job as done and requeue it.
        sys.exit(130 if stopped_by == signal.SIGINT else 0)


if __name__ == "__main__":
    main()
