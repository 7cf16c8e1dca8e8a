"""Runs a Blind Cliffwalk grid (variants × n × seeds), in parallel (`cliffwalk.plots` summarizes
it).

A variant is a representation (tabular or linear) and a replay strategy. For one seed and one
n every variant sees the same memory order and the same initial θ (common random numbers:
both come from SeedSequence([seed, n])), so variants differ only by how they replay.

A `Study` is one comparison the command line runs: the paper's figures (`PAPER`), the
learning-progress signals (`SIGNALS`), or the streaming memory (`cliffwalk.streaming`).
"""

import csv
import multiprocessing
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from functools import partial

import numpy as np

from cliffwalk.env import exhaustive_transitions, memory_size
from cliffwalk.learners import QLearner
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
    """One comparison of `python -m cliffwalk`: how a run goes, which strategies it knows, and
    what it draws. Its csv and summary are `{name}.csv` and `{name}_summary.md`, its figures
    `{panel name}.png`. `memory` names the x axis, `memory_column` the table's column of the
    memory size, `updates` the y axis: they differ when the memory is not the paper's.
    `paired`, if any, writes a markdown comparison of runs that share a seed, for the summary."""

    name: str
    run: Callable[[str, int, int, object], RunResult]
    strategies: Collection[str]
    panels: dict[str, Panel]
    result: type = RunResult
    memory: str = "transitions in replay memory, 2^(n+1) − 2"
    memory_column: str = "transitions"
    updates: str = "updates until MSE < 10⁻³"
    paired: Callable[[Sequence[RunResult]], str] | None = None

    @property
    def variants(self) -> tuple[str, ...]:
        """Every variant its panels draw, each once, in panel order."""
        return tuple(
            dict.fromkeys(
                f"{panel.representation}/{strategy}"
                for panel in self.panels.values()
                for strategy in panel.strategies
            )
        )

    def parse(self, variant: str) -> tuple[str, str]:
        return parse_variant(variant, self.strategies)


def _run_task(task) -> RunResult:
    run, *arguments = task
    return run(*arguments)


# The most memory one run takes per transition of its memory, measured at n = 18 and 20
# (peak resident memory 274-280 bytes: mostly the exhaustive fill's Python tuples), rounded up.
RUN_BYTES_PER_TRANSITION = 300


def grid_bytes(max_n: int, jobs: int, runs: int) -> int:
    """About the most memory a grid takes at once: its `jobs` workers each on a run of the
    largest memory (they start first), or as many as there are runs."""
    return min(jobs, runs) * RUN_BYTES_PER_TRANSITION * memory_size(max_n)


def run_grid(
    study: Study,
    variants: Sequence[str],
    ns: Iterable[int],
    seeds: Iterable[int],
    settings,
    jobs: int = 2,
    log=sys.stderr,
    finished: list[RunResult] | None = None,
) -> list[RunResult]:
    """Every (variant, n, seed) run of `study`, largest memories first so the slowest start
    early. `settings` is what `study.run` takes. Each result is also appended to `finished`
    as it comes in, so that a grid that fails part-way keeps the runs it finished."""
    for variant in variants:
        study.parse(variant)
    tasks = [
        (study.run, v, n, s, settings)
        for n in sorted(ns, reverse=True)
        for v in variants
        for s in seeds
    ]
    results = [] if finished is None else finished
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for result in pool.imap_unordered(_run_task, tasks):
            results.append(result)
            if log is not None:
                print(
                    f"[{len(results)}/{len(tasks)}] {result.representation}/"
                    f"{result.strategy} n={result.n} seed={result.seed}: {result.updates} "
                    f"updates, {result.status}, {result.seconds:.2f}s",
                    file=log,
                    flush=True,
                )
    return sorted(results, key=result_order)


def result_order(result: RunResult) -> tuple:
    """The order of cliffwalk.csv's rows."""
    return (result.representation, result.strategy, result.n, result.seed)


def write_results(results: Sequence[RunResult], path, kind: type = RunResult) -> None:
    """One row per run; `kind` is the results' dataclass (its fields are the columns)."""
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=[field.name for field in fields(kind)])
        writer.writeheader()
        writer.writerows(asdict(result) for result in results)


def read_results(path, kind: type = RunResult) -> list[RunResult]:
    types = {field.name: field.type for field in fields(kind)}
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    convert = {int: int, float: float, str: str}
    return [kind(**{k: convert[types[k]](v) for k, v in row.items()}) for row in rows]


def paired_table(
    results: Sequence[RunResult], title: str, comparisons: dict[str, tuple[str, str]]
) -> str:
    """Strategy B against strategy A seed by seed, for each column label → (A, B): the seeds
    where B needed fewer updates than A, and the median over seeds of updates(A)/updates(B)
    (above 1: B needed fewer). Runs of one seed share the memory (or stream) and θ, so their
    difference is the strategies' alone, which the min–max over seeds hides. A run that did not
    converge counts as +∞ updates; a ratio ∞/∞ is left out."""
    updates = {
        (r.representation, r.strategy, r.n, r.seed): r.updates if r.status == CONVERGED else np.inf
        for r in results
    }
    lines = [
        f"### {title}, seed by seed\n",
        "seeds where B needed fewer updates than A / seeds (and where as many); median over "
        "seeds of updates(A) / updates(B)\n",
        "| representation | n | "
        + " | ".join(label.replace("|", "\\|") for label in comparisons)
        + " |",
        "|---|---|" + "---|" * len(comparisons),
    ]
    for representation in REPRESENTATIONS:
        for n in sorted({key[2] for key in updates if key[0] == representation}):
            cells = []
            for a, b in comparisons.values():
                first, second = (
                    {
                        key[3]: value
                        for key, value in updates.items()
                        if key[:3] == (representation, strategy, n)
                    }
                    for strategy in (a, b)
                )
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
    run=run_one,
    strategies=STRATEGIES,
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

SIGNAL_LABELS = {"td_error": "|δ|", "td_error_change": "Δ|δ|", "parameter_change": "‖Δθ‖"}
# The learning-progress signals of Appendix A (and the method's patent), one panel per
# representation and sampler, each against uniform replay and the oracle.
SIGNALS = Study(
    name="signals",
    run=run_one,
    strategies=STRATEGIES,
    panels={
        f"signals_{representation}_{sampler}": Panel(
            representation,
            ("uniform", "oracle", *SIGNAL_STRATEGIES[sampler]),
            f"Priority signals, {representation}, {sampler.replace('_', '-')} sampler",
        )
        for representation in REPRESENTATIONS
        for sampler in SIGNAL_STRATEGIES
    },
    paired=partial(
        paired_table,
        title="Each other signal against |δ|",
        comparisons={
            f"{sampler.replace('_', '-')}: A = {SIGNAL_LABELS[strategy.partition(':')[2]]}, "
            "B = |δ|": (strategy, sampler)
            for sampler, strategies in SIGNAL_STRATEGIES.items()
            for strategy in strategies[1:]
        },
    ),
)
