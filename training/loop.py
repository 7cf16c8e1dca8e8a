"""The training loop. It owns time: agent steps, the ε, β and α schedules, learning start,
update period, target sync, and when to log, test and checkpoint."""

import math
import signal
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agents.double_dqn import DoubleDQN
from artifacts.run_directory import RunDirectory
from artifacts.snapshot import save_agent_snapshot
from envs.frame_stack import FrameStack
from envs.registry import TrainingEnv
from replay.buffer import ReplayBuffer
from training.checkpoints import CheckpointStore
from training.periodic_test import PeriodicTest
from training.progress import Progress
from training.run_record import RunRecord
from training.run_state import capture_run_state, restore_run_state
from training.settings import Run


def linear_schedule(start: float, end: float, begin_step: int, end_step: int, step: int) -> float:
    """`start` until `begin_step`, then linear to `end` at `end_step`, then `end`."""
    if end_step <= begin_step:
        return end if step >= end_step else start
    fraction = min(1.0, max(0.0, (step - begin_step) / (end_step - begin_step)))
    return (1.0 - fraction) * start + fraction * end  # exact at both ends


def importance_exponent_end_step(run: Run) -> int:
    """The step where β reaches its final value: `replay.importance_exponent_final_step`, or
    with null the run's last step (docs/results.md)."""
    return run.replay.importance_exponent_final_step or run.train.total_steps


def importance_exponent(run: Run, step: int) -> float:
    """β at `step`: β0 until learning starts, then linear to its final value at
    `importance_exponent_end_step`."""
    r, end_step = run.replay, importance_exponent_end_step(run)
    start, end = r.importance_exponent, r.importance_exponent_final
    return linear_schedule(start, end, run.train.learning_start_steps, end_step, step)


def priority_exponent(run: Run, step: int) -> float:
    """α from learning start annealed to `priority_exponent_final` at the run's last step (the
    paper's early rank-based DQN did)."""
    r, t = run.replay, run.train
    start, end = r.priority_exponent, r.priority_exponent_final
    return linear_schedule(start, end, t.learning_start_steps, t.total_steps, step)


@dataclass
class Components:
    """Everything a run is made of; `rngs` are the generators the components were given."""

    env: TrainingEnv
    agent: DoubleDQN
    replay: ReplayBuffer
    frame_stack: FrameStack
    env_seed: int
    rngs: dict[str, np.random.Generator]


class LearningDiverged(FloatingPointError):
    """The loss stopped being finite, or the Q-values left every value a return can have."""


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
    """One run's loop state between steps; `training.run_state` captures all of it."""

    def __init__(
        self,
        parts: Components,
        run: Run,
        run_dir: Path,
        checkpoints: CheckpointStore,
        stop: StopRequest,
        record: RunRecord,
    ):
        self.cfg = run
        self.record = record  # what the run runs with and what changed since its start
        self.compiling = self.cfg.agent.torch_compile  # until compiling fails
        self.parts, self.run_dir = parts, run_dir
        self.checkpoints, self.stop = checkpoints, stop
        self.step = 0
        self.episode_return = 0.0
        # The update in flight: (its step, its batch, its PendingLearn), or None.
        self.learning: tuple | None = None
        # The next step's action where it was chosen right behind an update (`_learn`).
        self.next_action: int | None = None
        self.periodic_test = PeriodicTest(
            self.cfg, run_dir, parts.rngs["evaluation"], lambda: stop.signal is not None
        )
        # A return of clipped rewards is at most reward_clip / (1 - γ) in size; a mean Q ten
        # times beyond that is divergence (NaN fails the comparison too). Unclipped: no bound.
        discount, clip = self.cfg.agent.discount, self.cfg.train.reward_clip
        self.q_limit = 10 * clip / (1 - discount) if discount < 1 and clip else math.inf

    def start(self, checkpoint: dict | None) -> None:
        """Reset the env for step 1, or restore a checkpoint's exact moment."""
        frame, _ = self.parts.env.reset(seed=self.parts.env_seed)
        if checkpoint is None:
            self._begin_episode(frame)
        else:
            self.checkpoints.read_frames(checkpoint, self.parts.replay.frames)
            restore_run_state(self, checkpoint["state"])
        self.progress = Progress(
            self.run_dir, self.cfg.train.total_steps, self.cfg.env.frame_skip, self.step
        )
        if checkpoint is not None:
            self.progress.load_state_dict(checkpoint["state"]["progress"])

    def run(self) -> int | None:
        """Train until the last step or a stop request; returns the signal that stopped it."""
        t, r, agent = self.cfg.train, self.cfg.replay, self.parts.agent
        # Only prioritized kinds have an α (`replay.settings`), and anneal it when it has an end.
        annealed_alpha = getattr(r, "priority_exponent_final", None) is not None
        alpha_period = r.priority_exponent_period_steps if annealed_alpha else None
        try:
            self.periodic_test.resume(agent, self.step, self.progress.writer)
            while self.step < t.total_steps and self.stop.signal is None:
                self.step += 1
                self._act_and_store()
                if self.step >= t.learning_start_steps and self.step % t.update_period_steps == 0:
                    self._learn()
                if self.step % t.target_update_period_steps == 0:
                    agent.sync_target()
                if annealed_alpha and self.step % alpha_period == 0:
                    self._settle_learning()
                    self.parts.replay.set_priority_exponent(priority_exponent(self.cfg, self.step))
                if self.step % t.log_period_steps == 0 or self.step == t.total_steps:
                    self._log()
                if self.step % self.periodic_test.period_steps == 0:
                    self.periodic_test.request(agent, self.step, self.progress.writer)
                self.periodic_test.poll(self.progress.writer)
                if self.step == t.total_steps:  # the last checkpoint then has every test's score
                    self.periodic_test.wait(self.progress.writer)
                if self.step % self.cfg.checkpoint.every_steps == 0:
                    self.save_checkpoint()
            if self.step % self.cfg.checkpoint.every_steps:
                self.save_checkpoint()
            if self.step == t.total_steps:
                self._finish()
        finally:
            self.periodic_test.close()
            self.progress.close()
        return self.stop.signal

    def _finish(self) -> None:
        """The run's hyperparameters with results, and the last step's agent as a snapshot,
        once every test is recorded; a stop request during that wait leaves the tests pending
        in the last checkpoint, and the resumed run finishes. The snapshot marks the run
        finished (a resume then changes nothing), so a run killed before it has written
        everything else. Then only the last checkpoint stays (`keep_latest_only`; a run
        stopped before that is finished, and its next command completes it)."""
        if not self.periodic_test.complete(self.progress.writer):
            return
        self._settle_learning()
        self.progress.hyperparameters(self.cfg, self.periodic_test.best_score)
        env, path = self.cfg.env, RunDirectory(self.run_dir).final_snapshot
        frames = self.step * env.frame_skip
        save_agent_snapshot(
            path, self.parts.agent, game=env.game, step=self.step, frames=frames, final=True
        )
        self.checkpoints.keep_latest_only()

    def _act_and_store(self) -> None:
        parts, t = self.parts, self.cfg.train
        action, self.next_action = self.next_action, None
        if action is None:  # not chosen behind an update (`_learn`): choose it now
            action = parts.agent.policy.act(parts.frame_stack.state, self.epsilon())
        frame, reward, terminated, truncated, info = parts.env.step(action)
        self.episode_return += reward
        clip = t.reward_clip
        clipped_reward = reward if clip is None else max(-clip, min(clip, reward))
        life_ends_bootstrap = info["life_lost"] and t.life_loss != "ignore"
        parts.replay.add(action, clipped_reward, terminated or life_ends_bootstrap, frame)
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
        """One update, settled at once (Algorithm 1's order) or, in pipelined mode (CUDA), at
        the next update: the 4 steps between act with the copy the agent took when it started.

        The next step's action is chosen right behind the update, before its priorities and
        this step's bookkeeping: it needs only the parameters the update leaves and the state
        the env gave, and nothing between here and the next step touches those or the agent's
        generator. On CUDA its forward pass queues behind the update, so that one wait covers
        both. The same actions and parameters as acting at the next step's start."""
        self._settle_learning()
        batch = self.parts.replay.sample(importance_exponent(self.cfg, self.step))
        self.learning = (self.step, batch, self.parts.agent.start_learning(batch))
        if self.step < self.cfg.train.total_steps:
            self._act_ahead()
        if self.compiling and self.parts.agent.compile_failure is not None:
            self.compiling = False  # the update this step ran eagerly, as every later one will
            failure = f"torch.compile failed ({self.parts.agent.compile_failure})"
            self.record.fall_back(self.step, "agent.torch_compile", failure)
        if not self.parts.agent.pipelined:
            self._settle_learning()

    def _act_ahead(self) -> None:
        state, epsilon = self.parts.frame_stack.state, self.epsilon(self.step + 1)
        self.next_action = self.parts.agent.policy.act(state, epsilon)

    def _settle_learning(self) -> None:
        """Finish the update in flight: its priorities and statistics. It runs before anything
        reads the replay's priorities and before the next update, at steps that do not depend
        on when a run was stopped (a checkpoint keeps the update in flight as it is)."""
        if self.learning is None:
            return
        step, batch, stats = self.finished_learning()
        self.learning = None
        self.parts.replay.update_priorities(batch.indices, stats)
        self.progress.learned(stats, batch.weights)

    def finished_learning(self) -> tuple:
        """The update in flight, waited for: (its step, its batch, its stats), once its loss
        and Q-values passed the divergence check (the diverged state is never saved)."""
        step, batch, pending = self.learning
        stats = pending.result()
        if not (math.isfinite(stats.loss) and abs(stats.mean_q) <= self.q_limit):
            raise LearningDiverged(
                f"the learner diverged at step {step}: loss {stats.loss}, mean Q "
                f"{stats.mean_q} (returns of clipped rewards lie within ±{self.q_limit / 10:g}); "
                "the diverged state was not saved"
            )
        return step, batch, stats

    def epsilon(self, step: int | None = None) -> float:
        """ε at `step` (by default this one): 1 until learning starts, then linear over
        `epsilon_decay_steps` (DeepMind's code: the replay-start actions are all random, none
        from the untrained network)."""
        t, step = self.cfg.train, self.step if step is None else step
        begin, end = t.learning_start_steps, t.learning_start_steps + t.epsilon_decay_steps
        return linear_schedule(t.epsilon_start, t.epsilon_final, begin, end, step)

    def _log(self) -> None:
        self._settle_learning()
        replay = self.parts.replay
        scalars = {
            "train/epsilon": self.epsilon(),
            "replay/importance_exponent": importance_exponent(self.cfg, self.step),
            **self.parts.agent.step_profile(),
        }
        self.progress.period(self.step, scalars, replay)
        if self.step % self.cfg.train.priority_histogram_period_steps == 0 and len(replay):
            self.progress.replay_profile(self.step, replay)

    def save_checkpoint(self) -> Path:
        state, replay = capture_run_state(self), self.parts.replay
        return self.checkpoints.save(self.step, state, replay.frames, replay.frames_written)
