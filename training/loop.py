"""The training loop. It owns time: agent steps, the ε, β and α schedules, learning start,
update period, target sync, logging and checkpoints."""

import json
import math
import signal
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from agents.double_dqn import DoubleDQN
from envs.atari import capture_env_state, restore_env_state
from envs.frame_stack import FrameStack
from evaluation.protocols import evaluate_noop
from evaluation.snapshot import save_agent_snapshot
from replay.buffer import ReplayBuffer
from training.checkpoints import CheckpointStore, save_atomically
from training.figures import replay_rate_figure, sorted_td_errors_figure
from training.progress import Progress


def linear_schedule(start: float, end: float, begin_step: int, end_step: int, step: int) -> float:
    """`start` until `begin_step`, then linear to `end` at `end_step`, then `end`."""
    if end_step <= begin_step:
        return end if step >= end_step else start
    fraction = min(1.0, max(0.0, (step - begin_step) / (end_step - begin_step)))
    return (1.0 - fraction) * start + fraction * end  # exact at both ends


@dataclass
class Components:
    """Everything a run is made of; `rngs` are the generators the components were given."""

    env: object
    agent: DoubleDQN
    replay: ReplayBuffer
    frame_stack: FrameStack
    env_seed: int
    rngs: dict[str, np.random.Generator]


def plain_config(cfg: DictConfig) -> SimpleNamespace:
    """The resolved config as nested namespaces: the same attribute paths, read at once."""

    def convert(value):
        if isinstance(value, dict):
            return SimpleNamespace(**{key: convert(item) for key, item in value.items()})
        return value

    return convert(OmegaConf.to_container(cfg, resolve=True))


def _select(config: SimpleNamespace, key: str):
    """The value at a dotted `key`, or None where the config has no such key."""
    for part in key.split("."):
        config = getattr(config, part, None)
    return config


class NonFiniteLearning(FloatingPointError):
    """The loss or the Q-values stopped being finite."""


class StopRequest:
    """SIGTERM or SIGINT ask the loop to checkpoint and stop; a second SIGINT stops at once."""

    def __init__(self):
        self.signal: int | None = None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame) -> None:
        if self.signal == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signum


class Training:
    """One run's loop state between steps; `state_dict` captures all of it for a checkpoint."""

    def __init__(
        self,
        parts: Components,
        cfg: DictConfig,
        run_dir: Path,
        checkpoints: CheckpointStore,
        stop: StopRequest,
    ):
        # Plain attributes: a DictConfig lookup costs ~10 µs, a dozen of them per step.
        self.cfg = plain_config(cfg)
        self.parts, self.run_dir = parts, run_dir
        self.checkpoints, self.stop = checkpoints, stop
        self.step = 0
        self.episode_return = 0.0
        self.best_score = -math.inf

    def start(self, checkpoint: dict | None) -> None:
        """Reset the env for step 1, or restore a checkpoint's exact moment."""
        parts = self.parts
        frame, _ = parts.env.reset(seed=parts.env_seed)
        if checkpoint is None:
            self._begin_episode(frame)
        else:
            self.checkpoints.read_frames(checkpoint, parts.replay.storage.frames)
            self.load_state_dict(checkpoint["state"])
        self.progress = Progress(
            self.run_dir, self.cfg.train.total_steps, self.cfg.env.frame_skip, self.step
        )
        if checkpoint is not None:
            self.progress.load_state_dict(checkpoint["state"]["progress"])

    def run(self) -> int | None:
        """Train until the last step or a stop request; returns the signal that stopped it."""
        t = self.cfg.train
        try:
            while self.step < t.total_steps and self.stop.signal is None:
                self.step += 1
                self._act_and_store()
                if self.step >= t.learning_start_steps and self.step % t.update_period_steps == 0:
                    self._learn()
                if self.step % t.target_update_period_steps == 0:
                    self.parts.agent.sync_target()
                if self.step % t.log_period_steps == 0 or self.step == t.total_steps:
                    self._log()
                if self.step % self.evaluation_period_steps == 0:
                    self._evaluate()
                if self.step % self.cfg.checkpoint.every_steps == 0:
                    self.save_checkpoint()
            if self.step % self.cfg.checkpoint.every_steps:
                self.save_checkpoint()
            if self.step == t.total_steps:
                save_atomically(self.run_dir / "agent_final.pt", self.parts.agent.state_dict())
                self._log_hyperparameters()
        finally:
            self.progress.close()
        return self.stop.signal

    def _act_and_store(self) -> None:
        parts, t = self.parts, self.cfg.train
        action = parts.agent.act(parts.frame_stack.state, self.epsilon())
        frame, reward, terminated, truncated, info = parts.env.step(action)
        self.episode_return += reward
        clipped_reward = max(-t.reward_clip, min(t.reward_clip, reward))
        parts.replay.add(action, clipped_reward, terminated or info["life_lost"], frame)
        parts.frame_stack.push(frame)
        if info["life_lost"] and not (terminated or truncated) and t.life_loss == "new_episode":
            # DeepMind's training rule: a lost life ends the stored episode (the next stacks
            # start from zeros) and the game goes on after a few no-op frames.
            frame, terminated, info = parts.env.noops_after_life_loss()
            if not terminated:
                self._begin_episode(frame)
        if terminated or truncated:
            self.progress.episode(self.step, self.episode_return, info["episode_frame_number"])
            frame, _ = parts.env.reset()
            self._begin_episode(frame)
            self.episode_return = 0.0

    def _begin_episode(self, frame) -> None:
        self.parts.frame_stack.reset(frame)
        self.parts.replay.start_episode(frame)

    def _learn(self) -> None:
        replay = self.parts.replay
        batch = replay.sample(self.importance_exponent())
        stats = self.parts.agent.learn(batch)
        if not (math.isfinite(stats.loss) and math.isfinite(stats.mean_q)):
            raise NonFiniteLearning(
                f"the loss ({stats.loss}) or mean Q ({stats.mean_q}) became non-finite at step "
                f"{self.step}; the diverged state was not saved"
            )
        replay.update_priorities(batch.indices, stats.td_errors)
        self.progress.learned(stats, batch.weights)

    def _schedule(self, start: float, end: float) -> float:
        """Linear from learning start to the end of training (β, and α when annealed)."""
        t = self.cfg.train
        return linear_schedule(start, end, t.learning_start_steps, t.total_steps, self.step)

    def epsilon(self) -> float:
        """1 until learning starts, then linear over `epsilon_decay_steps` (DeepMind's code: the
        replay-start actions are all random, none from the untrained network)."""
        t = self.cfg.train
        begin = t.learning_start_steps
        return linear_schedule(
            t.epsilon_start, t.epsilon_final, begin, begin + t.epsilon_decay_steps, self.step
        )

    def importance_exponent(self) -> float:
        r = self.cfg.replay
        return self._schedule(r.importance_exponent, r.importance_exponent_final)

    @property
    def evaluation_period_steps(self) -> int:
        return self.cfg.evaluation.every_frames // self.cfg.env.frame_skip

    def _evaluate(self) -> None:
        """The paper's periodic test: ε-greedy play from no-op starts for a budget of frames.
        Keeps the latest snapshot and the best one (what the human-starts protocol scores)."""
        cfg, agent = self.cfg, self.parts.agent
        result = evaluate_noop(
            agent,
            vars(cfg.env),
            rng=self.parts.rngs["evaluation"],
            epsilon=cfg.evaluation.epsilon,
            max_frames=cfg.evaluation.frames,
        )
        frames = self.step * cfg.env.frame_skip
        writer = self.progress.writer
        for name, value in result.summary(cfg.env.game, "noop").items():
            writer.add_scalar(f"eval/{name}", value, self.step)
            writer.add_scalar(f"eval_vs_frames/{name}", value, frames)
        # Exact per-episode scores, for exported results (scalars hold only the summary).
        writer.add_text("eval/episode_scores", json.dumps(result.scores.tolist()), self.step)
        snapshot = dict(game=cfg.env.game, step=self.step, frames=frames, score=result.mean)
        save_agent_snapshot(self.run_dir / "agent_latest.pt", agent, **snapshot)
        if result.mean > self.best_score:
            self.best_score = result.mean
            save_agent_snapshot(self.run_dir / "agent_best.pt", agent, **snapshot)

    # What a sweep varies, shown against the results in TensorBoard's HPARAMS view.
    HYPERPARAMETERS = (
        "env.game",
        "replay.kind",
        "replay.priority_exponent",
        "replay.importance_exponent",
        "agent.learning_rate",
        "seed",
    )

    def _log_hyperparameters(self) -> None:
        values = {key: _select(self.cfg, key) for key in self.HYPERPARAMETERS}
        metrics = {"hparams/final_return": float(np.mean(self.progress.returns or [np.nan]))}
        if math.isfinite(self.best_score):
            metrics["hparams/best_eval_score"] = self.best_score
        self.progress.writer.add_hparams(
            {key: value for key, value in values.items() if value is not None},
            metrics,
            run_name="hparams",
        )

    def _log(self) -> None:
        r, replay = self.cfg.replay, self.parts.replay
        scalars = {
            "train/epsilon": self.epsilon(),
            "replay/size": len(replay),
            "replay/importance_exponent": self.importance_exponent(),
            "replay/max_priority": replay.sampler.max_priority,
            "replay/nonfinite_td_errors": replay.nonfinite_td_errors,
        }
        if r.kind != "uniform":
            scalars["replay/priority_exponent"] = r.priority_exponent
            if r.priority_exponent_final is not None:
                # The paper's early rank-based DQN annealed α; changed once per log period,
                # since proportional replay rebuilds its tree for a new α.
                alpha = self._schedule(r.priority_exponent, r.priority_exponent_final)
                replay.sampler.set_priority_exponent(alpha)
                scalars["replay/priority_exponent"] = alpha
        sampleable = replay.storage.sampleable
        scalars.update(replay.statistics.summary(sampleable))
        self.progress.period(self.step, scalars)
        if self.step % self.cfg.train.priority_histogram_period_steps == 0 and len(replay):
            writer = self.progress.writer
            writer.add_histogram("replay/priorities", replay.sampler.priorities(), self.step)
            stats = replay.statistics
            for tag, figure in (
                ("replay/sorted_td_errors", sorted_td_errors_figure(stats, sampleable)),
                ("replay/replay_rate_by_td_error", replay_rate_figure(stats, sampleable)),
            ):
                writer.add_figure(tag, figure, self.step)

    def save_checkpoint(self) -> Path:
        storage = self.parts.replay.storage
        return self.checkpoints.save(
            self.step, self.state_dict(), storage.frames, storage.frames_written
        )

    def state_dict(self) -> dict:
        parts = self.parts
        return {
            "step": self.step,
            "episode_return": self.episode_return,
            "acting_state": parts.frame_stack.state,
            "env": capture_env_state(parts.env),
            "agent": parts.agent.state_dict(),
            "replay": parts.replay.state_dict(),
            "rngs": {name: rng.bit_generator.state for name, rng in parts.rngs.items()},
            "torch_rng": torch.get_rng_state(),  # unused by training today; kept for exactness
            "progress": self.progress.state_dict(),
            "best_score": self.best_score,
        }

    def load_state_dict(self, state: dict) -> None:
        parts = self.parts
        self.step = int(state["step"])
        self.episode_return = float(state["episode_return"])
        self.best_score = float(state["best_score"])
        parts.frame_stack.load(state["acting_state"])
        restore_env_state(parts.env, state["env"])
        parts.agent.load_state_dict(state["agent"])
        parts.replay.load_state_dict(state["replay"])
        for name, rng in parts.rngs.items():
            rng.bit_generator.state = state["rngs"][name]
        torch.set_rng_state(state["torch_rng"])
