"""Train Double DQN with uniform, rank-based or proportional experience replay on one Atari game.

    python train.py                                  # the paper's run: Pong, uniform replay
    python train.py replay=proportional env.game=breakout
    python train.py experiment=demo                 # a few minutes on a CPU

Only this file knows every component. It owns time: agent steps, the ε, β and α schedules,
learning start, update period, target sync, logging.
"""

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

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

REPLAY_KINDS = ("uniform", "proportional", "rank_based")


def linear_schedule(start: float, end: float, begin_step: int, end_step: int, step: int) -> float:
    """`start` until `begin_step`, then linear to `end` at `end_step`, then `end`."""
    if end_step <= begin_step:
        return end if step >= end_step else start
    fraction = min(1.0, max(0.0, (step - begin_step) / (end_step - begin_step)))
    return (1.0 - fraction) * start + fraction * end  # exact at both ends


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


@dataclass
class Components:
    env: object
    agent: DoubleDQN
    replay: ReplayBuffer
    frame_stack: FrameStack
    env_seed: int


def build(cfg: DictConfig) -> Components:
    """Construct every component from the config with plain constructor calls."""
    agent_seed, sampler_seed, env_seed = np.random.SeedSequence(cfg.seed).generate_state(3)
    torch.manual_seed(cfg.seed)
    env = make_env(seed=int(env_seed), **cfg.env)
    agent = DoubleDQN(env.action_space.n, rng=np.random.default_rng(agent_seed), **cfg.agent)
    storage = FrameStorage(
        cfg.replay.capacity, cfg.agent.history_length, (cfg.env.screen_size,) * 2
    )
    sampler = build_sampler(cfg.replay, np.random.default_rng(sampler_seed))
    replay = ReplayBuffer(storage, sampler, cfg.train.batch_size, cfg.replay.weight_normalization)
    frame_stack = FrameStack(cfg.agent.history_length, (cfg.env.screen_size,) * 2)
    return Components(env, agent, replay, frame_stack, int(env_seed))


class Progress:
    """TensorBoard scalars and the console progress bar, averaged over one log period."""

    def __init__(self, run_dir: Path, total_steps: int, frame_skip: int):
        self.writer = SummaryWriter(str(run_dir / "tensorboard"))
        self.bar = tqdm(total=total_steps, unit="step", dynamic_ncols=True)
        self.frame_skip = frame_skip
        self.returns = deque(maxlen=10)
        self._reset(0)

    def _reset(self, step: int):
        self._clock, self._step = time.perf_counter(), step
        self.loss_sum = self.q_sum = self.td_sum = self.weight_sum = 0.0
        self.max_weight, self.updates = 0.0, 0

    def learned(self, stats, weights: np.ndarray):
        self.loss_sum += stats.loss
        self.q_sum += stats.mean_q
        self.td_sum += float(np.abs(stats.td_errors).mean())
        self.weight_sum += float(weights.mean())
        self.max_weight = max(self.max_weight, float(weights.max()))
        self.updates += 1

    def episode(self, step: int, episode_return: float, length_frames: int):
        self.returns.append(episode_return)
        for tag, value in (("return", episode_return), ("length_frames", length_frames)):
            self.writer.add_scalar(f"episode/{tag}", value, step)
            self.writer.add_scalar(f"episode_vs_frames/{tag}", value, step * self.frame_skip)

    def period(self, step: int, scalars: dict[str, float]):
        elapsed = time.perf_counter() - self._clock
        steps_per_second = (step - self._step) / max(elapsed, 1e-9)
        scalars["speed/steps_per_second"] = steps_per_second
        scalars["speed/frames_per_second"] = steps_per_second * self.frame_skip
        if self.updates:
            scalars["train/loss"] = self.loss_sum / self.updates
            scalars["train/mean_q"] = self.q_sum / self.updates
            scalars["train/mean_abs_td_error"] = self.td_sum / self.updates
            scalars["replay/mean_weight"] = self.weight_sum / self.updates
            scalars["replay/max_weight"] = self.max_weight
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        last = f"{self.returns[-1]:.0f}" if self.returns else "-"
        mean = f"{np.mean(self.returns):.1f}" if self.returns else "-"
        self.bar.set_postfix_str(
            f"{steps_per_second:.0f} steps/s, return {last} (mean10 {mean})", refresh=False
        )
        self.bar.update(step - self._step)
        self._reset(step)

    def close(self):
        self.writer.close()
        self.bar.close()


def train(parts: Components, cfg: DictConfig, run_dir: Path) -> None:
    """The training loop: act, store, learn from replay, update priorities, log."""
    env, agent, replay, stack = parts.env, parts.agent, parts.replay, parts.frame_stack
    t, r = cfg.train, cfg.replay
    progress = Progress(run_dir, t.total_steps, cfg.env.frame_skip)
    frame, _ = env.reset(seed=parts.env_seed)
    state = stack.reset(frame)
    replay.start_episode(frame)
    episode_return = 0.0
    beta = r.importance_exponent
    for step in range(1, t.total_steps + 1):
        epsilon = linear_schedule(t.epsilon_start, t.epsilon_final, 0, t.epsilon_decay_steps, step)
        action = agent.act(state, epsilon)
        frame, reward, terminated, truncated, info = env.step(action)
        episode_return += reward
        clipped_reward = max(-t.reward_clip, min(t.reward_clip, reward))
        replay.add(action, clipped_reward, terminated or info["life_lost"], frame)
        state = stack.push(frame)
        if terminated or truncated:
            progress.episode(step, episode_return, info["episode_frame_number"])
            frame, _ = env.reset()
            state = stack.reset(frame)
            replay.start_episode(frame)
            episode_return = 0.0

        if step >= t.learning_start_steps and step % t.update_period_steps == 0:
            beta = linear_schedule(
                r.importance_exponent,
                r.importance_exponent_final,
                t.learning_start_steps,
                t.total_steps,
                step,
            )
            batch = replay.sample(beta)
            stats = agent.learn(batch)
            replay.update_priorities(batch.indices, stats.td_errors)
            progress.learned(stats, batch.weights)
        if step % t.target_update_period_steps == 0:
            agent.sync_target()

        if step % t.log_period_steps == 0 or step == t.total_steps:
            scalars = {
                "train/epsilon": epsilon,
                "replay/size": len(replay),
                "replay/importance_exponent": beta,
                "replay/max_priority": replay.sampler.max_priority,
                "replay/nonfinite_td_errors": replay.nonfinite_td_errors,
            }
            if r.kind != "uniform":
                scalars["replay/priority_exponent"] = anneal_priority_exponent(r, t, step, replay)
            progress.period(step, scalars)
        if step % t.priority_histogram_period_steps == 0 and len(replay):
            progress.writer.add_histogram("replay/priorities", replay.sampler.priorities(), step)
    progress.close()
    torch.save(agent.state_dict(), run_dir / "agent_final.pt")


def anneal_priority_exponent(r: DictConfig, t: DictConfig, step: int, replay: ReplayBuffer):
    """α, annealed only when `replay.priority_exponent_final` is set (the paper's early
    rank-based DQN took it from 0.5 to 0); changed once per log period, as the authors did."""
    if r.priority_exponent_final is None:
        return r.priority_exponent
    alpha = linear_schedule(
        r.priority_exponent, r.priority_exponent_final, t.learning_start_steps, t.total_steps, step
    )
    replay.sampler.set_priority_exponent(alpha)
    return alpha


@hydra.main(version_base="1.3", config_path="configs", config_name="config")
def main(cfg: DictConfig) -> None:
    validate_config(cfg)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    parts = build(cfg)
    try:
        train(parts, cfg, run_dir)
    finally:
        parts.env.close()


if __name__ == "__main__":
    main()
