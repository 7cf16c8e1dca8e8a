"""The PER paper's two evaluation protocols (Appendix B.2.3; docs/evaluation.md): no-op starts,
from any env kind's own reset, and human starts, Atari only, whose frame cap counts the human
prefix and whose score only the rewards after the start point. Each evaluation has its own env
and ``rng`` (the env seed and every ε draw), so it never touches the training env or the agent's
generator. Scores are unclipped game scores."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from tqdm import tqdm

from envs.frame_stack import FrameStack
from envs.games import resolve_game
from envs.registry import build_env, env_settings
from evaluation.human_starts.start_state_file import StartStates, restore_start
from evaluation.human_starts.verification import verify_start_states
from evaluation.scores import normalized_score

NOOP_EPSILON = 0.01  # Table 5, "Test", tuned Double DQN and both prioritized variants
HUMAN_STARTS_EPSILON = 0.001  # Table 5, "Human starts"


# Who hears of each episode as it ends, with its score: evaluate.py's progress bar, so that a
# long evaluation shows it is going on. Not an argument, so that the registry's `Evaluator`
# signature, which new protocols implement, stays as it is.
episode_listener: ContextVar[Callable[[float], None]] = ContextVar(
    "episode_listener", default=lambda score: None
)


@contextlib.contextmanager
def episode_progress(total: int | None, unit: str) -> Iterator[None]:
    """A progress bar on stderr counting the episodes that end meanwhile, with the last score."""
    with tqdm(total=total, unit=unit, leave=False) as bar:
        listening = episode_listener.set(
            lambda score: bar.update(1) or bar.set_postfix(score=f"{score:g}")
        )
        try:
            yield
        finally:
            episode_listener.reset(listening)


class Policy(Protocol):
    """What an evaluator needs from an agent (`agents.policy.EpsilonGreedy` is one)."""

    history_length: int

    def act(
        self, state: np.ndarray, epsilon: float, rng: np.random.Generator | None = None
    ) -> int: ...


@dataclass(frozen=True)
class EvaluationResult:
    """One evaluation's episodes in play order; frame numbers count no-ops and a human prefix."""

    scores: np.ndarray  # unclipped returns
    episode_frames: np.ndarray  # when each episode ended: what the frame cap applies to
    start_frames: np.ndarray  # when the agent took over
    emulated_frames: int  # all frames emulated, a discarded unfinished episode's included
    partial: bool = False  # the single score is of an episode cut by the frame budget

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores))

    @property
    def std(self) -> float:
        return float(np.std(self.scores))

    def summary(self, game: str, reference: str | None) -> dict[str, float]:
        """Scalars for logging; the normalized score with protocol ``reference``'s table, if any."""
        normalized = {} if reference is None else {
            "normalized_score": normalized_score(self.mean, game, reference)
        }  # fmt: skip
        return {
            "score": self.mean,
            "score_std": self.std,
            **normalized,
            "episodes": float(len(self.scores)),
            "emulated_frames": float(self.emulated_frames),
        }


def evaluate_noop(
    agent: Policy,
    env_kwargs: dict,
    *,
    rng: np.random.Generator,
    epsilon: float = NOOP_EPSILON,
    episodes: int | None = None,
    max_frames: int | None = None,
) -> EvaluationResult:
    """ε-greedy play from the env's reset (``env_kwargs``: the run config's ``env``):
    ``episodes`` whole episodes (30 where neither is given), or the episodes completed within
    ``max_frames`` emulated frames (the paper's test: 500,000). Where none completed, the cut
    episode's score is the one score and ``partial`` is True (DQN Zoo's rule; DeepMind's Lua
    code averages completed episodes only).
    """
    if episodes is not None and max_frames is not None:
        raise ValueError("give episodes or max_frames, not both")
    if episodes is None and max_frames is None:
        episodes = 30
    env, stack = _env_and_stack(agent, env_kwargs, rng)
    scores, ends, starts, emulated, partial = [], [], [], 0, False
    with contextlib.closing(env):
        while episodes is None or len(scores) < episodes:
            frame, info = env.reset()
            limit = None if max_frames is None else max_frames - emulated
            score, end, finished = _play(
                env, agent, stack.reset(frame), stack, rng, epsilon, frame_limit=limit
            )
            emulated += end  # this episode's frames, its no-ops included
            if finished:
                episode_listener.get()(score)
            if finished or not scores:
                partial = not finished
                scores.append(score)
                ends.append(end)
                starts.append(info["episode_frame_number"])
            if not finished or (max_frames is not None and emulated >= max_frames):
                break
    return _result(scores, ends, starts, emulated, partial)


def evaluate_human_starts(
    agent: Policy,
    env_kwargs: dict,
    start_states: StartStates,
    *,
    rng: np.random.Generator,
    epsilon: float = HUMAN_STARTS_EPSILON,
) -> EvaluationResult:
    """One ε-greedy episode from each start point, entered with ``restore_start`` (no no-ops: the
    restore would overwrite them). The start points are verified first: one that does not
    restore faithfully is a one-line ValueError, never a silently wrong score."""
    _check_start_states(agent, env_kwargs, start_states)
    verify_start_states(start_states)
    env, stack = _env_and_stack(agent, {**env_kwargs, "noop_max": 0}, rng)
    ale = env.unwrapped.ale
    scores, ends, starts, emulated = [], [], [], 0
    with contextlib.closing(env):
        for index in range(len(start_states)):
            env.reset()
            restore_start(ale, start_states, index)
            prefix = int(start_states.episode_frames[index])
            stack.load(start_states.frames[index])  # its shape checked above
            score, end, _ = _play(env, agent, stack.state, stack, rng, epsilon)
            episode_listener.get()(score)
            scores.append(score)
            ends.append(end)
            starts.append(prefix)
            emulated += end - prefix
    return _result(scores, ends, starts, emulated, False)


def _env_and_stack(agent: Policy, env_kwargs: dict, rng: np.random.Generator):
    env = build_env(env_settings(env_kwargs), seed=int(rng.integers(2**31)))
    return env, FrameStack(agent.history_length, env.observation_space.shape)


def _play(env, agent: Policy, state, stack: FrameStack, rng, epsilon, frame_limit=None):
    """(score, final frame number, whether it ended by itself) of play up to ``frame_limit``."""
    score = 0.0
    while True:
        frame, reward, terminated, truncated, info = env.step(agent.act(state, epsilon, rng=rng))
        score += reward
        end = info["episode_frame_number"]
        if terminated or truncated:
            return score, end, True
        if frame_limit is not None and end >= frame_limit:
            return score, end, False
        state = stack.push(frame)


def _check_start_states(agent: Policy, env_kwargs: dict, starts: StartStates) -> None:
    """The stored acting states must be the ones this env and agent would build."""
    env = env_settings(env_kwargs)
    wanted = {
        "game": (starts.game, resolve_game(env.game).rom_id),
        "frame_skip": (starts.frame_skip, env.frame_skip),
        "screen_size": (starts.screen_size, env.screen_size),
        "history_length": (starts.history_length, agent.history_length),
    }
    for key, (stored, used) in wanted.items():
        if stored != used:
            raise ValueError(
                f"start states have {key}={stored!r} but the evaluation uses {key}={used!r}"
            )
    sticky = env.repeat_action_probability
    if sticky:  # a sticky repeat could swallow the human action that enters a start point
        raise ValueError(
            f"human starts are played without sticky actions, the evaluation has "
            f"repeat_action_probability={sticky}: set env.repeat_action_probability=0.0"
        )
    cap = env.max_episode_frames
    if cap and len(starts) and int(starts.episode_frames.max()) >= cap:
        raise ValueError(
            f"a start point begins at frame {int(starts.episode_frames.max())}, at "
            f"or past env.max_episode_frames={cap}: nothing would be left to play"
        )


def _result(scores, ends, starts, emulated, partial) -> EvaluationResult:
    return EvaluationResult(
        scores=np.asarray(scores, dtype=np.float64),
        episode_frames=np.asarray(ends, dtype=np.int64),
        start_frames=np.asarray(starts, dtype=np.int64),
        emulated_frames=int(emulated),
        partial=bool(partial),
    )
