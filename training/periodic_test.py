"""The paper's periodic test (Appendix B.2.3) and the snapshots it keeps."""

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from artifacts.run_directory import RunDirectory
from artifacts.snapshot import save_agent_snapshot
from evaluation.protocols import evaluate_noop


class Interrupted(Exception):
    """A stop was requested in the middle of a periodic test."""


class _StoppablePolicy:
    """The agent, as the evaluator sees it, except that acting after a stop request ends the
    test at once (a test at the paper's size takes minutes on a CPU)."""

    def __init__(self, agent, stop_requested: Callable[[], bool]):
        self.agent, self.stop_requested = agent, stop_requested
        self.history_length = agent.history_length

    def act(self, state, epsilon, rng=None):
        if self.stop_requested():
            raise Interrupted
        return self.agent.act(state, epsilon, rng)


class PeriodicTest:
    """ε-greedy play from no-op starts for a budget of frames, with its own env and `rng`, so
    testing never changes the training run. Keeps `agent_latest.pt` and the best-scoring
    `agent_best.pt` (what the human-starts protocol scores).

    State (in checkpoints): `best_score`, the score of the agent in `agent_best.pt`, and
    `pending_step`, the step of a test a stop request interrupted (None if none): it runs
    again, from the same random state, when the run resumes, so its scores are the ones an
    uninterrupted run gets."""

    def __init__(
        self,
        cfg: SimpleNamespace,
        run_dir: Path,
        rng: np.random.Generator,
        stop_requested: Callable[[], bool] = lambda: False,
    ):
        self.cfg, self.run_directory, self.rng = cfg, RunDirectory(run_dir), rng
        self.stop_requested = stop_requested
        self.best_score = -math.inf
        self.pending_step: int | None = None
        self.period_steps = cfg.evaluation.every_frames // cfg.env.frame_skip

    def run(self, agent, step: int, writer) -> None:
        """Test `agent` at `step`; if a stop interrupts it, it is left pending."""
        cfg, rng_state = self.cfg, self.rng.bit_generator.state
        try:
            result = evaluate_noop(
                _StoppablePolicy(agent, self.stop_requested),
                vars(cfg.env),
                rng=self.rng,
                epsilon=cfg.evaluation.epsilon,
                max_frames=cfg.evaluation.frames,
            )
        except Interrupted:
            self.rng.bit_generator.state, self.pending_step = rng_state, step
            return
        self.pending_step = None
        frames = step * cfg.env.frame_skip
        for name, value in result.summary(cfg.env.game, "noop").items():
            writer.add_scalar(f"eval/{name}", value, step)
            writer.add_scalar(f"eval_vs_frames/{name}", value, frames)
        # Exact per-episode scores, for exported results (scalars hold only the summary).
        writer.add_text("eval/episode_scores", json.dumps(result.scores.tolist()), step)
        snapshot = dict(game=cfg.env.game, step=step, frames=frames, score=result.mean)
        _save_or_warn(self.run_directory.latest_snapshot, agent, snapshot)
        better = result.mean > self.best_score
        if better and _save_or_warn(self.run_directory.best_snapshot, agent, snapshot):
            self.best_score = result.mean


def _save_or_warn(path: Path, agent, snapshot: dict) -> bool:
    """A snapshot that cannot be written (a full disk) leaves the previous one intact (the
    write is atomic) and the run goes on: one line on stderr, and False."""
    try:
        save_agent_snapshot(path, agent, **snapshot)
    except OSError as error:
        print(
            f"warning: {path.name} not updated at step {snapshot['step']} "
            f"({error.strerror or error}); the previous one is kept",
            file=sys.stderr,
        )
        return False
    return True
