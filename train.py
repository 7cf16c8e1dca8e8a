"""Train Double DQN with uniform, rank-based or proportional experience replay on one Atari game.

    python train.py                                  # the paper's run: Pong, uniform replay
    python train.py replay=proportional env.game=breakout
    python train.py experiment=demo                 # a few minutes on a CPU
    python train.py resume=runs/pong/uniform/<date>  # continue from its last checkpoint

This file validates the config and builds the components; `training.loop` runs them.
"""

import os
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

from agents.double_dqn import DoubleDQN, optimizer_epsilon
from agents.optimizer import OPTIMIZERS
from artifacts.command_line import say
from artifacts.run_directory import RunDirectory
from envs.frame_stack import FrameStack
from envs.registry import build_env, environment_kind
from launch.config_defaults import register_defaults
from launch.run_config import (
    check_run,
    record_run_config,
    record_start,
    remove_created_directories,
    run_config,
    shell_override,
)
from launch.run_guard import (
    RunDirectoryError,
    check_command_line,
    error_line,
    keep_freed_memory,
    lock_run_directory,
    torch_threads,
)
from launch.sweep_checks import STOP_STATUS
from replay.buffer import NonFiniteTDErrors, ReplayBuffer
from replay.priority_signals import signal_named
from replay.registry import SAMPLERS, build_storage
from training.checkpoints import CheckpointError, CheckpointStore
from training.evaluation_worker import EvaluationWorkerError
from training.loop import (
    Components,
    LearningDiverged,
    StopRequest,
    Training,
    importance_exponent_end_step,
)
from training.progress import check_event_files
from training.run_record import RunRecord, config_record, resumed_record
from training.run_state import resumable, threads_run_with
from training.settings import Run


def build(run: Run) -> Components:
    """Construct every component from the run's settings, each from its own section."""
    seeds = np.random.SeedSequence(run.seed).generate_state(4)
    agent_seed, sampler_seed, env_seed, evaluation_seed = seeds
    torch.manual_seed(run.seed)
    rngs = {
        "agent": np.random.default_rng(agent_seed),
        "sampler": np.random.default_rng(sampler_seed),
        "evaluation": np.random.default_rng(evaluation_seed),
    }
    env = build_env(run.env, seed=int(env_seed))
    signal = run.replay.priority_signal
    frame_shape = env.observation_space.shape
    agent = DoubleDQN(
        env.action_space.n,
        run.agent,
        rng=rngs["agent"],
        batch_size=run.train.batch_size,
        frame_shape=frame_shape,
        # Per-sample gradients on every update: only for the signal that reads them.
        compute_parameter_change_norms=signal_named(signal).reads_parameter_change_norms,
    )
    storage = build_storage(
        run.replay.eviction,
        run.replay.capacity,
        run.agent.history_length,
        frame_shape,
        device=None if run.replay.device == "cpu" else agent.device,
    )
    sampler = SAMPLERS[run.replay.kind].from_settings(run.replay, rngs["sampler"])
    replay = ReplayBuffer(
        storage,
        sampler,
        run.train.batch_size,
        run.replay.weight_normalization,
        priority_signal=signal,
        priority_epsilon=run.replay.priority_epsilon,
        td_error_clip=run.agent.td_error_clip,  # one clip for the loss and the priorities
        pin_memory=agent.device.type == "cuda" and run.replay.device == "cpu",
    )
    frame_stack = FrameStack(run.agent.history_length, frame_shape)
    return Components(env, agent, replay, frame_stack, int(env_seed), rngs)


def derived_settings(run: Run) -> list[str]:
    """What the run uses that its config holds only as inputs: the optimizer's ε and β's
    schedule (`optimizer_epsilon`, `importance_exponent`); they head its config.yaml."""
    a, r, t = run.agent, run.replay, run.train
    placement = "inside the square root" if OPTIMIZERS[a.optimizer] else "outside the root"
    beta = f"β: {r.importance_exponent} throughout"  # its end step changes nothing
    if r.importance_exponent != r.importance_exponent_final:
        beta = (
            f"β: {r.importance_exponent} until step {t.learning_start_steps}, then linear to "
            f"{r.importance_exponent_final} at step {importance_exponent_end_step(run)}"
        )
    return [
        "derived from the settings below:",
        f"the optimizer's ε: {optimizer_epsilon(a, t.batch_size)} ({a.optimizer}, "
        f"{placement}, for the batch's mean loss)",
        beta,
    ]


def _fail(error: Exception | str, status: int) -> NoReturn:
    say(f"error: {error if isinstance(error, str) else error_line(error)}")
    sys.exit(status)


def run_name(env_kind, game, replay_kind) -> str:
    """The default run directory's `<game>/<replay kind>` (its resolver in configs/config.yaml):
    the game by its id, however env.game spelt it (`SpaceInvaders` runs under space_invaders/,
    beside its other runs). Hydra makes the directory before `main` runs: a name that is no
    game or no sampler stands as `unknown` (any name could be too long for a file system),
    and `main` refuses the run and removes the directories made for it."""
    try:
        game = environment_kind(env_kind).game_id(str(game))
    except ValueError:
        game = UNKNOWN
    return f"{game}/{replay_kind if replay_kind in SAMPLERS else UNKNOWN}"


UNKNOWN = "unknown"
OmegaConf.register_new_resolver("or_else", lambda value, default: value or default)
OmegaConf.register_new_resolver("run_name", run_name)


def prepare(cfg: DictConfig, run_dir: Path) -> tuple | None:
    """Settle and check the config, read the checkpoint to resume from and check the config
    against it; bad input ends here with one line and status 2, before anything is
    allocated. Returns (the config, the checkpoints, the checkpoint to resume from or None,
    the run's record), or None for a finished run (said on stderr; nothing changes)."""
    try:
        cfg = run_config(cfg)
        run, done = check_run(cfg, run_dir, HydraConfig.get().runtime.choices.get("replay"))
        checkpoints = CheckpointStore(RunDirectory(run_dir).checkpoints, run.checkpoint.keep)
        checkpoint = checkpoints.read_latest()
        record, notes = RunRecord(run_dir, config_record(cfg)), []
        if checkpoint is not None:
            checkpoint = resumable(checkpoint, run)
            record, notes = resumed_record(run_dir, cfg, checkpoint)
            notes += check_event_files(run_dir, checkpoint["state"]["progress"])
    except (ValueError, CheckpointError) as error:
        remove_created_directories(run_dir)
        _fail(error, 2)
    if done:  # resuming would only rewrite its results
        say(finished_line(run_dir, checkpoints))
        return None
    for note in notes:
        say(note)
    return cfg, run, checkpoints, checkpoint, record


def finished_line(run_dir: Path, checkpoints: CheckpointStore) -> str:
    """The line of a finished run's command. Its end keeps its last checkpoint alone
    (`Training._finish`); one stopped before it could is completed where the disk can be
    written, and a read-only one is left as it is."""
    if os.access(checkpoints.directory, os.W_OK) and checkpoints.keep_latest_only():
        return (
            f"run {run_dir} is finished: removed the checkpoints before its last, which its "
            "interrupted end left; nothing else to do"
        )
    return f"run {run_dir} is finished: nothing to do"


def resume_command(run_dir: Path, hydra: DictConfig) -> str:
    """How to continue a stopped run. A sweep's job: the sweep's command again, in the same
    sweep directory, which resumes every unfinished job (the finished ones say so and change
    nothing); not a train.py of its own, which would run where the sweep was started (on a
    cluster, its login node). Pasted into a shell, it names the directory whatever its name
    (`shell_override`)."""
    if hydra.mode == RunMode.MULTIRUN:
        return f"the sweep's command with {shell_override('hydra.sweep.dir', hydra.sweep.dir)}"
    return f"python train.py {shell_override('resume', run_dir)}"


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
    say(
        f"stopped by {signal.Signals(stopped_by).name} at step {step}; "
        + (resume if saved is not None else "no checkpoint was written")
    )
    sys.exit(STOP_STATUS[stopped_by])


# configs/ builds on the schemas' defaults: stored here, by the application itself, before
# Hydra composes (a sweep's jobs get them with Hydra's state, on a cluster node too).
register_defaults()


@hydra.main(version_base="1.3", config_path="configs", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        lock = lock_run_directory(run_dir)
    except RunDirectoryError as error:
        _fail(error, 2)  # another process owns the directory: leave it alone
    try:
        run_in_directory(cfg, run_dir)
    finally:  # however the job ends: a sweep's worker goes on to its next job
        os.close(lock)


def run_in_directory(cfg: DictConfig, run_dir: Path) -> None:
    """The job in its locked run directory: a run started, resumed, or found finished."""
    prepared = prepare(cfg, run_dir)
    if prepared is None:  # returning, not exiting: a sweep goes on with its next job
        return
    cfg, run, checkpoints, checkpoint, record = prepared
    stop = StopRequest()
    stop.install()  # before building: a SIGTERM while allocating still ends in a clean exit
    torch.set_num_threads(torch_threads(run.threads, threads_run_with(checkpoint)))
    keep_freed_memory()
    try:
        parts = build(run)
    except ValueError as error:  # a component refused its arguments (a new sampler's, say)
        remove_created_directories(run_dir)
        _fail(error, 2)
    except BaseException:
        remove_created_directories(run_dir)
        raise
    record_run_config(run_dir, cfg, derived_settings(run))  # the run starts: now it has a record
    record.write()  # the changes its checkpoint holds, and those made now
    training = Training(parts, run, run_dir, checkpoints, stop, record)
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
