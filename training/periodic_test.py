"""The paper's periodic test (Appendix B.2.3) and the snapshots it keeps."""

import functools
import json
import math
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from artifacts.run_directory import RunDirectory
from artifacts.snapshot import read_snapshot, save_agent_snapshot
from artifacts.tensor_tree import save_atomically
from envs.registry import environment_kind
from evaluation.protocols import EvaluationResult
from training.checkpoints import CheckpointError
from training.evaluation_worker import EvaluationWorker, Interrupted, Played, play_test
from training.settings import Run

AGENT_FILE = re.compile(r"(\.)?step-(\d{12})\.pt(\.tmp)?")  # or its temporary, while written


class PeriodicTest:
    """ε-greedy play from no-op starts for a budget of frames, with its own env and `rng`, so
    testing never changes the training run. Keeps `agent_latest.pt` and the best-scoring
    `agent_best.pt` (what the human-starts protocol scores).

    Tests are recorded (TensorBoard at the test's step, the snapshots, `best_score`) in step
    order, and each one draws from `rng` where the one before left it: played inline
    (`evaluation.worker: false`) or by an `EvaluationWorker` process while training goes on,
    they score the same.

    State (`state_dict`, in checkpoints): `best_score`, the score of the agent in
    `agent_best.pt`, and `pending_steps`, the tests requested and not recorded yet, oldest
    first. `rng` (checkpointed with the run's generators) stands at the start of the oldest of
    them, or after the last recorded test when none is pending, so a resumed run plays them
    again from the same random state and gets the scores an uninterrupted run gets. Inline,
    only a stop request leaves a test pending: the one at the checkpoint's own step, whose
    agent is the checkpoint's. With a worker, a test's agent file is kept until no checkpoint
    that may still exist lists the test as pending.
    """

    def __init__(
        self,
        cfg: Run,
        run_dir: Path,
        rng: np.random.Generator,
        stop_requested: Callable[[], bool] = lambda: False,
    ):
        self.cfg, self.run_directory, self.rng = cfg, RunDirectory(run_dir), rng
        self.stop_requested = stop_requested
        self.best_score = -math.inf
        self.pending_steps: list[int] = []
        self.period_steps = cfg.evaluation.every_frames // cfg.env.frame_skip
        # `play_test`'s settings, inline and in the worker alike
        self.settings = dict(
            env_kwargs=vars(cfg.env), epsilon=cfg.evaluation.epsilon, frames=cfg.evaluation.frames
        )
        self.in_worker = cfg.evaluation.worker
        self.agent_files = Path(run_dir) / "pending_tests"  # the agents of tests not recorded
        self._worker: EvaluationWorker | None = None
        # The agent files of recorded tests, by the checkpoint period they were recorded in;
        # the last list is the current period's (see `state_dict`).
        self._recorded: list[list[Path]] = [[], []]

    def request(self, agent, step: int, writer) -> None:
        """Test `agent` at `step`: inline at once, else from a snapshot of it, in the worker."""
        if not self.in_worker:
            self.run(agent, step, writer)
            return
        path = self._agent_file(step)
        try:
            self._save_agent(agent, step, path, score=None)
        except OSError as error:
            raise CheckpointError(
                f"could not write {path}, the agent of the periodic test at step {step} "
                f"({error.strerror or error})"
            ) from None
        self.pending_steps.append(step)
        self._submit(agent, step)

    def run(self, agent, step: int, writer) -> None:
        """Test `agent` at `step` in this process, now (inline, or with nothing pending); if a
        stop interrupts it, it is left pending."""
        rng_state, policy = self.rng.bit_generator.state, agent.online_policy()
        try:
            result = play_test(
                policy, **self.settings, rng=self.rng, stop_requested=self.stop_requested
            )
        except Interrupted:
            self.rng.bit_generator.state, self.pending_steps = rng_state, [step]
            return
        self.pending_steps = []
        self._record(step, result, writer, functools.partial(self._save_agent, agent, step))

    def resume(self, agent, step: int, writer) -> None:
        """Before this process's first step, `step` the checkpoint's: play again the tests it
        left pending, and delete from `pending_tests/` the agent files of later steps, which the
        resumed run plays again, and half-written ones. Those of tests up to `step` that no
        pending test uses were recorded before the checkpoint at `step`, and an older kept
        checkpoint may list them: they are deleted as that period's files are (`state_dict`)."""
        if not self.in_worker:
            if self.pending_steps:
                self.run(agent, self.pending_steps[0], writer)
            return
        for path in self.agent_files.glob("*"):  # none where the directory is not
            match = AGENT_FILE.fullmatch(path.name)
            if match is None:
                continue
            temporary, tested = match.group(1) or match.group(3), int(match.group(2))
            if temporary or tested > step:
                path.unlink()
            elif tested not in self.pending_steps:
                self._recorded[0].append(path)
        for pending in self.pending_steps:
            path = self._agent_file(pending)
            if not path.is_file():
                raise CheckpointError(
                    f"the checkpoint lists the periodic test at step {pending} as pending, but "
                    f"its agent {path} is missing"
                )
            self._submit(agent, pending)

    def poll(self, writer) -> None:
        """Record the tests the worker finished, without waiting. Once a stop is requested
        nothing more is recorded: the tests left are the checkpoint's to list."""
        if self.pending_steps and self._worker is not None and not self.stop_requested():
            for played in self._worker.played():
                self._record_played(played, writer)

    def wait(self, writer) -> bool:
        """Record every requested test, waiting for the worker; False when a stop request came
        first (the tests left stay pending)."""
        while self.pending_steps and self._worker is not None and not self.stop_requested():
            for played in self._worker.played(timeout=0.2):  # then looks at the stop request
                self._record_played(played, writer)
        return not self.pending_steps

    def complete(self, writer) -> bool:
        """The run's end: `wait`, then remove `pending_tests/`, which a finished run no longer
        needs; False, with nothing removed, when a stop request came first."""
        finished = self.wait(writer)
        if finished and self.agent_files.is_dir():
            shutil.rmtree(self.agent_files)
        return finished

    def close(self) -> None:
        """End the worker, if one was started; the tests it had not finished stay pending."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def state_dict(self) -> dict:
        """What a checkpoint about to be written stores (`rng` is with the run's generators).
        Each call ends a checkpoint period: the agent files of the tests recorded more than
        `checkpoint.keep` periods ago are deleted, as no checkpoint still kept, nor one that a
        failed save could leave, lists those tests as pending."""
        self._recorded.append([])
        while len(self._recorded) > self.cfg.checkpoint.keep + 1:
            for path in self._recorded.pop(0):
                path.unlink(missing_ok=True)
        return {"best_score": self.best_score, "pending_test_steps": list(self.pending_steps)}

    def load_state_dict(self, state: dict) -> None:
        self.best_score = float(state["best_score"])
        self.pending_steps = [int(step) for step in state["pending_test_steps"]]

    def _save_agent(self, agent, step: int, path: Path, score: float | None) -> None:
        game, frames = self.cfg.env.game, step * self.cfg.env.frame_skip
        save_agent_snapshot(path, agent, game=game, step=step, frames=frames, score=score)

    def _agent_file(self, step: int) -> Path:
        return self.agent_files / f"step-{step:012d}.pt"

    def _submit(self, agent, step: int) -> None:
        if self._worker is None:  # started at `rng`'s state: the oldest pending test's start
            self._worker = EvaluationWorker(
                self.settings, rng=self.rng, device=str(agent.device), cuda_graphs=agent.cuda_graphs
            )
        self._worker.submit(step, self._agent_file(step))

    def _record_played(self, played: Played, writer) -> None:
        """The worker answers in request order: `played` is the oldest pending test's."""
        step = self.pending_steps.pop(0)
        path = self._agent_file(step)
        payload = read_snapshot(path)
        self.rng.bit_generator.state = played.rng_state

        def save(target: Path, score: float) -> None:
            save_atomically(target, {**payload, "score": score})

        self._record(step, played.result, writer, save)
        self._recorded[-1].append(path)

    def _record(self, step: int, result: EvaluationResult, writer, save: Callable) -> None:
        """Log the test at `step` and keep its agent, which `save(path, score)` writes."""
        cfg, frames = self.cfg, step * self.cfg.env.frame_skip
        human_reference = environment_kind(cfg.env.kind).has_human_reference
        summary = result.summary(cfg.env.game, "noop" if human_reference else None)
        for name, value in summary.items():
            writer.add_scalar(f"eval/{name}", value, step)
            writer.add_scalar(f"eval_vs_frames/{name}", value, frames)
        # Exact per-episode scores, for exported results (scalars hold only the summary).
        writer.add_text("eval/episode_scores", json.dumps(result.scores.tolist()), step)
        _save_or_warn(self.run_directory.latest_snapshot, step, result.mean, save)
        better = result.mean > self.best_score
        if better and _save_or_warn(self.run_directory.best_snapshot, step, result.mean, save):
            self.best_score = result.mean


def _save_or_warn(path: Path, step: int, score: float, save) -> bool:
    """A snapshot that cannot be written (a full disk) leaves the previous one intact (the
    write is atomic) and the run goes on: one line on stderr, and False."""
    try:
        save(path, score)
    except OSError as error:
        tqdm.write(  # above the run's progress bar, not on its line
            f"warning: {path.name} not updated at step {step} "
            f"({error.strerror or error}); the previous one is kept",
            file=sys.stderr,
        )
        return False
    return True
