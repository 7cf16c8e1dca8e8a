"""The evaluation protocols `evaluate.py` offers: ``PROTOCOLS``, one ``Protocol`` record each,
from which evaluate.py and its score table read everything about a protocol. A new protocol is
one record and, at most, one ``Evaluator`` (docs/evaluation.md, "Adding a protocol").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envs.registry import EnvironmentKind
from evaluation.protocols import (
    HUMAN_STARTS_EPSILON,
    NOOP_EPSILON,
    EvaluationResult,
    evaluate_human_starts,
    evaluate_noop,
)

# 30 minutes at 60 Hz: both of the paper's protocols cap an episode there (Appendix B.2.3).
THIRTY_MINUTES_FRAMES = 108_000


# Plays one run's episodes under a protocol: (agent, env_kwargs, *, rng, epsilon, episodes,
# start_states) -> EvaluationResult, where episodes None is all start points.
Evaluator = Callable[..., EvaluationResult]


@dataclass(frozen=True)
class Protocol:
    """One protocol. One with a ``reference`` table or ``needs_start_states`` evaluates only env
    kinds with human reference data; evaluate.py refuses it for others before any play."""

    name: str  # protocol=NAME on the command line; the report is evaluation_NAME.json/.csv
    epsilon: float  # of the ε-greedy policy (the paper's Table 5); epsilon=E overrides it
    reference: str | None  # whose reference table normalizes the scores; None: raw scores
    budget: int | None  # episodes per run unless episodes=N; None: one per start point
    unit: str  # what the budget counts, in the report's title
    # The report's first line, with {noop_max}, {reset} (what the env's reset plays before the
    # agent acts), {epsilon} and {episodes} filled in.
    title: str
    evaluate: Evaluator
    max_episode_frames: int = THIRTY_MINUTES_FRAMES  # where the run's config sets no cap
    needs_start_states: bool = False  # evaluate.py refuses to run it without start_states=
    # The run's own test ε (its config's evaluation.epsilon), where it has one, replaces
    # ``epsilon``: a protocol that plays as the run's periodic test does uses the run's ε.
    uses_run_epsilon: bool = False

    def budget_text(self, episodes: int | None) -> str:
        """'30 episodes per run'; 'all start points per run', 'first 5 start points per run'."""
        if self.budget is None:  # then episodes=N is a quick look at the first N start points
            count = f"first {episodes}" if episodes else "all"
        else:
            count = str(episodes or self.budget)
        return f"{count} {self.unit} per run"

    def unavailable_reason(self, environment: EnvironmentKind) -> str | None:
        """Why this protocol cannot evaluate runs of ``environment``, or None when it can."""
        if environment.has_human_reference:
            return None
        if self.needs_start_states:  # start-state files hold human play's emulator states
            return f"the {environment.family} games have no human start states"
        if self.reference is not None:
            family = environment.family
            return f"the {family} games have no human reference scores to normalize with"
        return None


def _from_reset(agent, env_kwargs, *, rng, epsilon, episodes, start_states) -> EvaluationResult:
    return evaluate_noop(agent, env_kwargs, rng=rng, epsilon=epsilon, episodes=episodes)


def _human_starts(agent, env_kwargs, *, rng, epsilon, episodes, start_states) -> EvaluationResult:
    if episodes is not None:
        start_states = start_states.first(episodes)
    return evaluate_human_starts(agent, env_kwargs, start_states, rng=rng, epsilon=epsilon)


PROTOCOLS: dict[str, Protocol] = {
    protocol.name: protocol
    for protocol in (
        Protocol(
            name="noop",
            epsilon=NOOP_EPSILON,
            reference="noop",
            budget=30,
            unit="episodes",
            title="No-op starts evaluation (1-{noop_max} random no-ops, ε {epsilon}, "
            "{episodes}), normalized with the no-op reference scores (Wang et al. 2016)",
            evaluate=_from_reset,
        ),
        Protocol(
            name="human_starts",
            epsilon=HUMAN_STARTS_EPSILON,
            reference="human_starts",
            budget=None,
            unit="start points",
            needs_start_states=True,
            title="Human-starts evaluation (ε {epsilon}, {episodes}), normalized with the "
            "human-starts reference scores (Nair et al. 2015, van Hasselt et al. 2016)",
            evaluate=_human_starts,
        ),
        Protocol(
            name="episodes",
            epsilon=NOOP_EPSILON,
            reference=None,
            budget=30,
            unit="episodes",
            title="Episodes from the env's own reset ({reset}; ε {epsilon}, {episodes}), "
            "raw scores, not human-normalized",
            evaluate=_from_reset,
            uses_run_epsilon=True,
        ),
    )
}
