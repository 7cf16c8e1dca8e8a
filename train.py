"""Train Double DQN with uniform, rank-based or proportional experience replay on one Atari game.

    python train.py                                  # the paper's run: Pong, uniform replay
    python train.py replay=proportional env.game=breakout
    python train.py experiment=demo                 # a few minutes on a CPU
    python train.py resume=runs/pong/uniform/<date>  # continue from its last checkpoint

This file validates the config and builds the components; `training.loop` runs them.
"""

import signal
import sys
import time
from pathlib import Path
from typing import NoReturn

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from agents.double_dqn import DoubleDQN
from artifacts.atomic import write_atomically
from artifacts.run_directory import RunDirectory
from envs.atari import make_env
from envs.frame_stack import FrameStack
from replay.buffer import NonFiniteTDErrors, ReplayBuffer
from replay.registry import build_sampler
from replay.storage import FrameStorage
from training.checkpoints import CheckpointError, CheckpointStore
from training.loop import Components, LearningDiverged, StopRequest, Training
from training.plain_config import plain_config
from training.run_guard import (
    RunDirectoryError,
    check_command_line,
    lock_run_directory,
    torch_threads,
)
from training.run_state import check_resumable
from training.validation import validate_config

# `hydra.run.dir` is the resumed run's directory when `resume` is set.
OmegaConf.register_new_resolver(
    "or_else", lambda value, default: default if value is None else value
)

# Hydra creates the run directory before `main` runs; see `_remove_created_directories`.
_STARTED_NS = time.time_ns()


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
    agent = DoubleDQN(
        env.action_space.n, rng=rngs["agent"], batch_size=cfg.train.batch_size, **cfg.agent
    )
    storage = FrameStorage(
        cfg.replay.capacity, cfg.agent.history_length, (cfg.env.screen_size,) * 2
    )
    # One TD-error clip for the loss and the priorities.
    sampler_settings = {**cfg.replay, "td_error_clip": cfg.agent.td_error_clip}
    sampler = build_sampler(cfg.replay.kind, sampler_settings, rngs["sampler"])
    replay = ReplayBuffer(storage, sampler, cfg.train.batch_size, cfg.replay.weight_normalization)
    frame_stack = FrameStack(cfg.agent.history_length, (cfg.env.screen_size,) * 2)
    return Components(env, agent, replay, frame_stack, int(env_seed), rngs)


def claim_run_directory(run_dir: Path, cfg: DictConfig) -> None:
    """Write the resolved config, or check that the directory's run has the same one."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.pop("resume", None)
    path = RunDirectory(run_dir).config_file
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
    path = RunDirectory(Path(cfg.resume)).config_file
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
        lock_run_directory(run_dir)
    except RunDirectoryError as error:
        _fail(error, 2)  # another process owns the directory: leave it alone
    try:
        cfg = run_config(cfg)
        validate_config(cfg)
        claim_run_directory(run_dir, cfg)
        checkpoints = CheckpointStore(RunDirectory(run_dir).checkpoints, cfg.checkpoint.keep)
        checkpoint = checkpoints.read_latest()
        if checkpoint is not None:
            check_resumable(checkpoint, plain_config(cfg))
    except (ValueError, CheckpointError) as error:
        _remove_created_directories(run_dir)
        _fail(error, 2)
    stop = StopRequest()
    stop.install()  # before building: a SIGTERM while allocating still ends in a clean exit
    torch.set_num_threads(torch_threads(cfg.threads))
    parts = build(cfg)
    training = Training(parts, cfg, run_dir, checkpoints, stop)
    try:
        training.start(checkpoint)
        stopped_by = training.run()
    except (CheckpointError, LearningDiverged, NonFiniteTDErrors) as error:
        _fail(error, 1)
    except KeyboardInterrupt:  # a second SIGINT: stop at once, from wherever the loop was
        stopped_by = signal.SIGINT
    finally:
        parts.env.close()
    if stopped_by is not None:
        saved = checkpoints.latest_step()
        since = "" if saved == training.step else f" from its checkpoint at step {saved}"
        resume = f"resume{since} with: python train.py resume={run_dir}"
        print(
            f"stopped by {signal.Signals(stopped_by).name} at step {training.step}; "
            + (resume if saved is not None else "no checkpoint was written"),
            file=sys.stderr,
        )
        # 0 after SIGTERM, so schedulers treat the preempted job as done and requeue it.
        sys.exit(130 if stopped_by == signal.SIGINT else 0)


if __name__ == "__main__":
    try:
        check_command_line(sys.argv[1:])
    except RunDirectoryError as error:
        _fail(error, 2)
    main()
