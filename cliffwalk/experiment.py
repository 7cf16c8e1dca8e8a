"""Blind Cliffwalk runs, one per variant, n and seed. A variant is a representation and a replay
strategy; for one seed and n every variant sees the same memory order and initial θ (both from
SeedSequence([seed, n])), so variants differ only by how they replay. A `Study` is one
comparison, a grid of runs: the paper's figures (`PAPER`), the learning-progress signals
(`SIGNALS`), or the streaming memory (`cliffwalk.streaming`).
"""

import csv
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from cliffwalk.learners import QLearner, exhaustive_transitions
from cliffwalk.strategies import (
    CONVERGED,
    SIGNAL_STRATEGIES,
    STRATEGIES,
    ReplaySettings,
)

REPRESENTATIONS = ("tabular", "linear")


@dataclass(frozen=True)
class RunResult:
    """One row of cliffwalk.csv (or of signals.csv, the same runs with other strategies)."""

    representation: str
    strategy: str
    n: int
    transitions: int
    seed: int
    updates: int  # until MSE < tolerance; when not converged, until the run ended
    status: str  # converged | capped | stalled (see cliffwalk.strategies.Outcome)
    final_mse: float
    max_abs_td_error: float  # the samplers clip |δ| to 1: how far above 1 did it ever go?
    td_errors_above_one: int
    seconds: float

    @property
    def converged_updates(self) -> float:
        """`updates`, or +∞ if the run did not converge: no statistic pretends it was fast."""
        return self.updates if self.status == CONVERGED else np.inf


def parse_variant(variant: str, strategies: Collection[str] = STRATEGIES) -> tuple[str, str]:
    """'linear/proportional' -> ('linear', 'proportional'), with a one-line error if unknown."""
    representation, _, strategy = variant.partition("/")
    if representation not in REPRESENTATIONS or strategy not in strategies:
        raise ValueError(
            f"unknown variant {variant!r}: use REPRESENTATION/STRATEGY with REPRESENTATION in "
            f"{', '.join(REPRESENTATIONS)} and STRATEGY in {', '.join(strategies)}"
        )
    return representation, strategy


def run_one(variant: str, n: int, seed: int, settings: ReplaySettings) -> RunResult:
    """One learning run: fill the memory, initialize θ, replay until converged or capped."""
    representation, strategy = parse_variant(variant)
    memory_seed, theta_seed, replay_seed = np.random.SeedSequence([seed, n]).spawn(3)
    memory = exhaustive_transitions(n, np.random.default_rng(memory_seed))
    learner = QLearner(
        memory, has_bias=representation == "linear", rng=np.random.default_rng(theta_seed)
    )
    start = time.perf_counter()
    outcome = STRATEGIES[strategy](learner, np.random.default_rng(replay_seed), settings)
    return RunResult(
        representation=representation,
        strategy=strategy,
        n=n,
        transitions=len(memory),
        seed=seed,
        updates=outcome.updates,
        status=outcome.status,
        final_mse=learner.mse(),
        max_abs_td_error=learner.max_abs_td_error,
        td_errors_above_one=learner.td_errors_above_one,
        seconds=round(time.perf_counter() - start, 4),
    )


@dataclass(frozen=True)
class Panel:
    """One figure of a study, with its table: these strategies on this representation."""

    representation: str
    strategies: tuple[str, ...]
    title: str


@dataclass(frozen=True)
class Study:
    """One comparison of `python -m cliffwalk`: `{name}.csv`, `{name}_summary.md` and a figure
    per panel. `memory` and `updates` name the axes, `memory_column` the table's memory size;
    `comparisons`, if any, of runs that share a seed are the summary's `paired_table`."""

    name: str
    panels: dict[str, Panel]
    run: Callable[[str, int, int, ReplaySettings], RunResult] = run_one
    strategies: Collection[str] = tuple(STRATEGIES)
    result: type = RunResult
    memory: str = "transitions in replay memory, 2^(n+1) − 2"
    memory_column: str = "transitions"
    updates: str = "updates until MSE < 10⁻³"
    paired_title: str = ""
    comparisons: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def variants(self) -> tuple[str, ...]:
        panels = self.panels.values()
        return tuple(dict.fromkeys(f"{p.representation}/{s}" for p in panels for s in p.strategies))


def write_results(results: Sequence[RunResult], path, kind: type = RunResult) -> None:
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=[field.name for field in fields(kind)])
        writer.writeheader()
        writer.writerows(asdict(result) for result in results)


def read_results(path, kind: type = RunResult) -> list[RunResult]:
    types = {field.name: field.type for field in fields(kind)}
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    return [kind(**{k: types[k](v) for k, v in row.items()}) for row in rows]


def paired_table(
    results: Sequence[RunResult], title: str, comparisons: dict[str, tuple[str, str]]
) -> str:
    """Strategy B against A seed by seed, per column label → (A, B): the seeds where B needed
    fewer updates, and the median of updates(A)/updates(B). Runs of a seed share memory and θ,
    so their difference is the strategies' alone. A run that did not converge counts as +∞
    updates; a ratio ∞/∞ is left out."""
    updates: dict[tuple[str, str, int], dict[int, float]] = defaultdict(dict)
    for r in results:
        updates[r.representation, r.strategy, r.n][r.seed] = r.converged_updates
    labels = " | ".join(label.replace("|", "\\|") for label in comparisons)
    lines = [
        f"### {title}, seed by seed\n",
        "seeds where B needed fewer updates than A / seeds (and where as many); median over "
        "seeds of updates(A) / updates(B)\n",
        f"| representation | n | {labels} |",
        "|---|---|" + "---|" * len(comparisons),
    ]
    for representation in REPRESENTATIONS:
        for n in sorted({key[2] for key in updates if key[0] == representation}):
            cells = []
            for a, b in comparisons.values():
                first, second = (updates.get((representation, s, n), {}) for s in (a, b))
                pairs = [(first[seed], second[seed]) for seed in sorted(first.keys() & second)]
                ratios = [x / y for x, y in pairs if min(x, y) < np.inf]
                wins, equal = sum(y < x for x, y in pairs), sum(y == x for x, y in pairs)
                tied = f" ({equal} equal)" if equal else ""
                median = f"{np.median(ratios):.2f}×" if ratios else "–"
                cells.append(f"{wins}/{len(pairs)}{tied}, {median}")
            lines.append(f"| {representation} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# The paper's panels: Figure 1 (tabular; with greedy TD-error as in Figure 2 left) and
# Figure 2 right (linear function approximation, the stochastic variants).
PAPER = Study(
    name="cliffwalk",
    panels={
        "figure1": Panel(
            "tabular",
            ("uniform", "oracle", "greedy"),
            "Blind Cliffwalk, tabular (Fig. 1 and Fig. 2 left)",
        ),
        "figure2": Panel(
            "linear",
            ("uniform", "oracle", "rank_based", "proportional"),
            "Blind Cliffwalk, linear FA (Fig. 2 right)",
        ),
    },
)

OTHER_SIGNAL_LABELS = {"td_error_change": "Δ|δ|", "parameter_change": "‖Δθ‖"}
# The learning-progress signals of Appendix A (and the method's patent), one panel per
# representation and sampler, each against uniform replay and the oracle.
SIGNALS = Study(
    name="signals",
    panels={
        f"signals_{representation}_{sampler}": Panel(
            representation,
            ("uniform", "oracle", *SIGNAL_STRATEGIES[sampler]),
            f"Priority signals, {representation}, {sampler.replace('_', '-')} sampler",
        )
        for representation in REPRESENTATIONS
        for sampler in SIGNAL_STRATEGIES
    },
    paired_title="Each other signal against |δ|",
    comparisons={
        f"{sampler.replace('_', '-')}: A = {label}, B = |δ|": (f"{sampler}:{signal}", sampler)
        for sampler in SIGNAL_STRATEGIES
        for signal, label in OTHER_SIGNAL_LABELS.items()
    },
)
