"""Train Double DQN with uniform, rank-based or proportional experience replay on one Atari game.

    python train.py                                  # the paper's run: Pong, uniform replay
    python train.py replay=proportional env.game=breakout
    python train.py experiment=demo                 # a few minutes on a CPU
    python train.py resume=runs/pong/uniform/<date>  # continue from its last checkpoint

This file validates the config and builds the components; `training.loop` runs them.
"""

import math
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from agents.double_dqn import DoubleDQN, resolve_device
from envs.atari import make_env
from envs.frame_stack import FrameStack
from envs.games import resolve_game
from replay.buffer import NonFiniteTDErrors, ReplayBuffer
from replay.priorities import WEIGHT_NORMALIZATIONS
from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import Sampler, UniformSampler
from replay.storage import FrameStorage
from training.checkpoints import CheckpointError, CheckpointStore, write_atomically
from training.loop import Components, NonFiniteLearning, StopRequest, Training

# `hydra.run.dir` is the resumed run's directory when `resume` is set.
OmegaConf.register_new_resolver(
    "or_else", lambda value, default: default if value is None else value
)

# Hydra creates the run directory before `main` runs; see `_remove_created_directories`.
_STARTED_NS = time.time_ns()

REPLAY_KINDS = ("uniform", "proportional", "rank_based")
POSITIVE_INTEGERS = (
    "train.total_steps",
    "train.batch_size",
    "train.update_period_steps",
    "train.target_update_period_steps",
    "train.log_period_steps",
    "train.priority_histogram_period_steps",
    "checkpoint.every_steps",
    "agent.history_length",
    "env.frame_skip",
)
NON_NEGATIVE_INTEGERS = (
    "seed",
    "train.epsilon_decay_steps",
    "env.noop_max",
    "env.max_episode_frames",
)
FRACTIONS = (
    "train.epsilon_start",
    "train.epsilon_final",
    "replay.importance_exponent",
    "replay.importance_exponent_final",
    "agent.discount",
    "env.repeat_action_probability",
)
POSITIVE_NUMBERS = (
    "train.reward_clip",
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


def _positive_number(value) -> bool:
    return _number(value) and value > 0


def _rules(cfg: DictConfig) -> list[tuple[str, str, Callable[[object], bool]]]:
    """(key, what is allowed, test of the value) in checking order; a test may rely on the
    keys checked before it."""
    t, kind = cfg.train, cfg.replay.kind
    rules = [("replay.kind", f"one of {', '.join(REPLAY_KINDS)}", lambda v: v in REPLAY_KINDS)]
    rules += [(key, "a positive integer", _positive_integer) for key in POSITIVE_INTEGERS]
    rules += [(key, "an integer >= 0", _non_negative_integer) for key in NON_NEGATIVE_INTEGERS]
    rules += [(key, "in [0, 1]", _fraction) for key in FRACTIONS]
    rules += [(key, "a number > 0", _positive_number) for key in POSITIVE_NUMBERS]
    rules += [
        (
            "replay.capacity",
            "at least train.batch_size and agent.history_length + 2, an integer",
            lambda v: _integer(v) and v >= max(t.batch_size, cfg.agent.history_length + 2),
        ),
        (
            "train.learning_start_steps",
            "at least train.batch_size, an integer",
            lambda v: _integer(v) and v >= t.batch_size,
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
        ("agent.rmsprop_decay", "in [0, 1)", lambda v: _number(v) and 0 <= v < 1),
        ("env.screen_size", "84, the Nature network's input", lambda v: _integer(v) and v == 84),
        ("env.full_action_space", "true or false", lambda v: isinstance(v, bool)),
        ("env.game", "a game name", lambda v: isinstance(v, str)),
        ("agent.device", "a device name", lambda v: isinstance(v, str)),
    ]
    if kind != "uniform":
        rules += [
            ("replay.priority_exponent", ">= 0", lambda v: _number(v) and v >= 0),
            (
                "replay.priority_exponent_final",
                "null or >= 0",
                lambda v: v is None or _number(v) and v >= 0,
            ),
            ("replay.priority_epsilon", "> 0", _positive_number),
        ]
    if kind == "rank_based":
        rules.append(("replay.resort_period", "a positive integer", _positive_integer))
    return rules


def validate_config(cfg: DictConfig) -> None:
    """Reject bad settings with one line naming the key, before anything is allocated."""
    for key, allowed, test in _rules(cfg):
        value = OmegaConf.select(cfg, key)
        if not test(value):
            raise ValueError(f"{key}={value} is not allowed: must be {allowed}")
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
    seeds = np.random.SeedSequence(cfg.seed).generate_state(4)
    agent_seed, sampler_seed, env_seed, evaluation_seed = seeds
    torch.manual_seed(cfg.seed)
    rngs = {
        "agent": np.random.default_rng(agent_seed),
        "sampler": np.random.default_rng(sampler_seed),
        "evaluation": np.random.default_rng(evaluation_seed),
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
        write_atomically(path, OmegaConf.to_yaml(resolved).encode())
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
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if run_dir.resolve() != path.parent.resolve():
        raise RunDirectoryError(
            f"resume={cfg.resume} with hydra.run.dir={run_dir} is not allowed: a resumed run "
            "continues in its own directory"
        )
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


def _remove_created_directories(run_dir: Path) -> None:
    """Undo Hydra's `mkdir -p` of the run directory for a refused run: remove it and then its
    parents while they are empty and were modified after this process started. A directory
    made before the command stays; an empty parent that existed before goes too (creating the
    run directory in it changed its time)."""
    directory = run_dir.absolute()
    while directory != directory.parent:
        try:
            if directory.stat().st_mtime_ns < _STARTED_NS or any(directory.iterdir()):
                return
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def _fail(error: Exception, status: int) -> NoReturn:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(status)


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
        _remove_created_directories(run_dir)
        _fail(error, 2)
    stop = StopRequest()
    stop.install()  # before building: a SIGTERM while allocating still ends in a clean exit
    parts = build(cfg)
    training = Training(parts, cfg, run_dir, checkpoints, stop)
    try:
        training.start(checkpoint)
        stopped_by = training.run()
    except (CheckpointError, NonFiniteLearning, NonFiniteTDErrors) as error:
        _fail(error, 1)
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
