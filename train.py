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
from typing import NoReturn

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from agents.double_dqn import DoubleDQN
from artifacts.run_directory import RunDirectory
from envs.frame_stack import FrameStack
from envs.registry import build_env, environment_kind
from replay.buffer import NonFiniteTDErrors, ReplayBuffer
from replay.priority_signals import needs_parameter_change_norms
from replay.registry import build_sampler, build_storage, sampler_class
from training.checkpoints import CheckpointError, CheckpointStore
from training.config_defaults import register_defaults
from training.evaluation_worker import EvaluationWorkerError
from training.loop import Components, LearningDiverged, StopRequest, Training
from training.plain_config import plain_config
from training.progress import check_event_files
from training.run_config import (
    check_run,
    record_run_config,
    record_start,
    remove_created_directories,
    run_config,
)
from training.run_guard import (
    RunDirectoryError,
    check_command_line,
    error_line,
    keep_freed_memory,
    lock_run_directory,
    torch_threads,
)
from training.run_record import RunRecord, config_record, resumed_record
from training.run_state import resumable, threads_run_with


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
    env = build_env(cfg.env, seed=int(env_seed))
    signal = cfg.replay.priority_signal
    frame_shape = env.observation_space.shape
    agent = DoubleDQN(
        env.action_space.n,
        rng=rngs["agent"],
        batch_size=cfg.train.batch_size,
        frame_shape=frame_shape,
        # Per-sample gradients on every update: only for the signal that reads them.
        compute_parameter_change_norms=needs_parameter_change_norms(signal),
        **cfg.agent,
    )
    storage = build_storage(
        cfg.replay.eviction,
        cfg.replay.capacity,
        cfg.agent.history_length,
        frame_shape,
        device=None if cfg.replay.device == "cpu" else agent.device,
    )
    sampler = build_sampler(cfg.replay.kind, cfg.replay, rngs["sampler"])
    replay = ReplayBuffer(
        storage,
        sampler,
        cfg.train.batch_size,
        cfg.replay.weight_normalization,
        priority_signal=signal,
        priority_epsilon=cfg.replay.priority_epsilon,
        td_error_clip=cfg.agent.td_error_clip,  # one clip for the loss and the priorities
        pin_memory=agent.device.type == "cuda" and cfg.replay.device == "cpu",
    )
    frame_stack = FrameStack(cfg.agent.history_length, frame_shape)
    return Components(env, agent, replay, frame_stack, int(env_seed), rngs)


def _fail(error: Exception | str, status: int) -> NoReturn:
    print(f"error: {error if isinstance(error, str) else error_line(error)}", file=sys.stderr)
    sys.exit(status)


def run_directory(resumed: str | None, default: str, _root_: DictConfig) -> str:
    """`hydra.run.dir` (its resolver `or_else` in configs/config.yaml): the resumed run's
    directory, else `default`, runs/<game>/<replay kind>/<date>. Hydra makes the directory
    as soon as it is resolved, before `main` runs, so the game and the replay kind that name
    it are checked here: a name that is neither gets its one line before a directory is
    named after it (or cannot be, as a name too long for the file system)."""
    if resumed is not None:
        return resumed
    env, replay = (OmegaConf.select(_root_, section) for section in ("env", "replay"))
    try:
        if isinstance(env, DictConfig):  # else the validation names the missing section
            kind = environment_kind(env.get("kind"))
            kind.settings.check("game", env.get("game"))
            kind.game_id(env.game)
        if isinstance(replay, DictConfig):
            sampler_class(replay.get("kind"))
    except ValueError as error:
        _fail(error, 2)
    return default


def game_directory(kind, game) -> str:
    """The run directory's game part (its resolver `game_directory` in configs/config.yaml):
    the game's id, however env.game spelt it (`SpaceInvaders` runs under space_invaders/,
    beside its other runs), or the name as given where it is no game (`run_directory` then
    refuses it before a directory is named after it)."""
    try:
        return environment_kind(kind).game_id(str(game))
    except ValueError:
        return str(game)


OmegaConf.register_new_resolver("or_else", run_directory)
OmegaConf.register_new_resolver("game_directory", game_directory)


def prepare(cfg: DictConfig, run_dir: Path) -> tuple | None:
    """Lock the run directory, settle and check the config, read the checkpoint to resume
    from and check the config against it; bad input ends here with one line and status 2,
    before anything is allocated. Returns (the config, the checkpoints, the checkpoint to
    resume from or None, the run's record), or None for a finished run (said on stderr;
    nothing changes)."""
    try:
        lock_run_directory(run_dir)
    except RunDirectoryError as error:
        _fail(error, 2)  # another process owns the directory: leave it alone
    try:
        cfg = run_config(cfg)
        done = check_run(cfg, run_dir, HydraConfig.get().runtime.choices.get("replay"))
        checkpoints = CheckpointStore(RunDirectory(run_dir).checkpoints, cfg.checkpoint.keep)
        checkpoint = checkpoints.read_latest()
        record, notes = RunRecord(run_dir, config_record(cfg)), []
        if checkpoint is not None:
            checkpoint = resumable(checkpoint, plain_config(cfg))
            record, notes = resumed_record(run_dir, cfg, checkpoint)
            notes += check_event_files(run_dir, checkpoint["state"]["progress"])
    except (ValueError, CheckpointError) as error:
        remove_created_directories(run_dir)
        _fail(error, 2)
    if done:  # its checkpoint is sound, and resuming would only rewrite its results
        print(f"run {run_dir} is finished: nothing to do", file=sys.stderr)
        return None
    for note in notes:
        print(note, file=sys.stderr)
    return cfg, checkpoints, checkpoint, record


def resume_command(run_dir: Path, hydra: DictConfig) -> str:
    """How to continue a stopped run. A sweep's job: the sweep's command again, in the same
    sweep directory, which resumes every unfinished job (the finished ones say so and change
    nothing); not a train.py of its own, which would run where the sweep was started (on a
    cluster, its login node)."""
    if hydra.mode == RunMode.MULTIRUN:
        return f"the sweep's command with hydra.sweep.dir={hydra.sweep.dir}"
    return f"python train.py resume={run_dir}"


def write_failure(error: OSError, step: int, run_dir: Path, checkpoints: CheckpointStore) -> str:
    """The line for a run stopped by a write that failed outside a checkpoint (which leaves
    the checkpoints complete): what failed, and where to resume from."""
    saved = checkpoints.latest_step()
    resume = f"resume with: {resume_command(run_dir, HydraConfig.get())}"
    kept = (
        "no checkpoint was written"
        if saved is None
        else f"its checkpoint at step {saved} is intact"
    )
    failed = f"the run stopped at step {step}: a write failed ({error})"
    return f"{failed}; {kept}: make room, then {resume}"


def report_stop(stopped_by: int, step: int, run_dir: Path, checkpoints: CheckpointStore):
    saved = checkpoints.latest_step()
    since = "" if saved == step else f" from its checkpoint at step {saved}"
    resume = f"resume{since} with: {resume_command(run_dir, HydraConfig.get())}"
    print(
        f"stopped by {signal.Signals(stopped_by).name} at step {step}; "
        + (resume if saved is not None else "no checkpoint was written"),
        file=sys.stderr,
    )
    # 0 after SIGTERM, so schedulers treat the preempted job as done and requeue it.
    sys.exit(130 if stopped_by == signal.SIGINT else 0)


# configs/ builds on the schemas' defaults: stored here, by the application itself, before
# Hydra composes (a sweep's jobs get them with Hydra's state, on a cluster node too).
register_defaults()


@hydra.main(version_base="1.3", config_path="configs", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    prepared = prepare(cfg, run_dir)
    if prepared is None:  # returning, not exiting: a sweep goes on with its next job
        return
    cfg, checkpoints, checkpoint, record = prepared
    stop = StopRequest()
    stop.install()  # before building: a SIGTERM while allocating still ends in a clean exit
    torch.set_num_threads(torch_threads(cfg.threads, threads_run_with(checkpoint)))
    keep_freed_memory()
    try:
        parts = build(cfg)
    except ValueError as error:  # a component refused its arguments (a new sampler's, say)
        remove_created_directories(run_dir)
        _fail(error, 2)
    except BaseException:
        remove_created_directories(run_dir)
        raise
    record_run_config(run_dir, cfg)  # the run starts: now it has a record
    record.write()  # the changes its checkpoint holds, and those made now
    training = Training(parts, cfg, run_dir, checkpoints, stop, record)
    try:
        try:
            training.start(checkpoint)
        except CheckpointError as error:  # its frames fail their checks as they are read back
            _fail(error, 2)  # bad input, as a damaged state file is; nothing was written yet
        record_start(run_dir, training.step)  # what made the run, from this step on
        stopped_by = training.run()
    except (CheckpointError, EvaluationWorkerError, LearningDiverged, NonFiniteTDErrors) as error:
        _fail(error, 1)
    except OSError as error:  # an event file or a test's agent that the disk refused (full)
        _fail(write_failure(error, training.step, run_dir, checkpoints), 1)
    except KeyboardInterrupt:  # a second SIGINT: stop at once, from wherever the loop was
        stopped_by = signal.SIGINT
    finally:
        parts.env.close()
    if stopped_by is not None:
        report_stop(stopped_by, training.step, run_dir, checkpoints)


if __name__ == "__main__":
    try:
        check_command_line(sys.argv[1:])
    except RunDirectoryError as error:
        _fail(error, 2)
    main()
