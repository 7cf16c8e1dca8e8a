"""Runs the Blind Cliffwalk grid (variants × n × seeds), in parallel, and summarizes it.

A variant is a representation (tabular or linear) and a replay strategy. For one seed and one
n every variant sees the same memory order and the same initial θ (common random numbers:
both come from SeedSequence([seed, n])), so variants differ only by how they replay.
"""

import csv
import multiprocessing
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from cliffwalk.env import exhaustive_transitions, memory_size
from cliffwalk.learners import QLearner
from cliffwalk.strategies import CAPPED, CONVERGED, STALLED, STRATEGIES, ReplaySettings

REPRESENTATIONS = ("tabular", "linear")
# The paper's panels: Figure 1 (tabular; with greedy TD-error as in Figure 2 left) and
# Figure 2 right (linear function approximation, the stochastic variants).
FIGURE_VARIANTS = {
    "figure1": ("tabular", ("uniform", "oracle", "greedy")),
    "figure2": ("linear", ("uniform", "oracle", "rank_based", "proportional")),
}
DEFAULT_VARIANTS = tuple(
    f"{representation}/{strategy}"
    for representation, strategies in FIGURE_VARIANTS.values()
    for strategy in strategies
)


@dataclass(frozen=True)
class RunResult:
    """One row of cliffwalk.csv."""

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


def parse_variant(variant: str) -> tuple[str, str]:
    """'linear/proportional' -> ('linear', 'proportional'), with a one-line error if unknown."""
    representation, _, strategy = variant.partition("/")
    if representation not in REPRESENTATIONS or strategy not in STRATEGIES:
        raise ValueError(
            f"unknown variant {variant!r}: use REPRESENTATION/STRATEGY with REPRESENTATION in "
            f"{', '.join(REPRESENTATIONS)} and STRATEGY in {', '.join(STRATEGIES)}"
        )
    return representation, strategy


def run_one(variant: str, n: int, seed: int, settings: ReplaySettings) -> RunResult:
    """One learning run: fill the memory, initialize θ, replay until converged or capped."""
    representation, strategy = parse_variant(variant)
    memory_seed, theta_seed, replay_seed = np.random.SeedSequence([seed, n]).spawn(3)
    memory = exhaustive_transitions(n, np.random.default_rng(memory_seed))
    learner = QLearner(memory, has_bias=representation == "linear",
                       rng=np.random.default_rng(theta_seed))
    start = time.perf_counter()
    outcome = STRATEGIES[strategy](learner, np.random.default_rng(replay_seed), settings)
    return RunResult(
        representation=representation, strategy=strategy, n=n, transitions=len(memory),
        seed=seed, updates=outcome.updates, status=outcome.status,
        final_mse=learner.mse(), max_abs_td_error=learner.max_abs_td_error,
        td_errors_above_one=learner.td_errors_above_one,
        seconds=round(time.perf_counter() - start, 4),
    )


def _run_task(task) -> RunResult:
    return run_one(*task)


def run_grid(variants: Sequence[str], ns: Iterable[int], seeds: Iterable[int],
             settings: ReplaySettings, jobs: int = 2, log=sys.stderr) -> list[RunResult]:
    """Every (variant, n, seed) run, largest memories first so the slowest start early."""
    for variant in variants:
        parse_variant(variant)
    tasks = [(v, n, s, settings) for n in sorted(ns, reverse=True) for v in variants
             for s in seeds]
    results = []
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for result in pool.imap_unordered(_run_task, tasks):
            results.append(result)
            if log is not None:
                print(f"[{len(results)}/{len(tasks)}] {result.representation}/"
                      f"{result.strategy} n={result.n} seed={result.seed}: {result.updates} "
                      f"updates, {result.status}, {result.seconds:.2f}s",
                      file=log, flush=True)
    return sorted(results, key=lambda r: (r.representation, r.strategy, r.n, r.seed))


def write_results(results: Sequence[RunResult], path) -> None:
    fields = list(RunResult.__dataclass_fields__)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fields)
        writer.writeheader()
        writer.writerows(asdict(result) for result in results)


def read_results(path) -> list[RunResult]:
    types = {name: field.type for name, field in RunResult.__dataclass_fields__.items()}
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    convert = {int: int, float: float, str: str}
    return [RunResult(**{k: convert[types[k]](v) for k, v in row.items()}) for row in rows]


@dataclass(frozen=True)
class Summary:
    """Median and min–max updates over the seeds of one variant at one n.

    A run that did not converge (capped or stalled) counts as +∞ updates: it never reached
    the tolerance within its budget. So `median` is ∞ once half the runs failed, `maximum`
    as soon as one did, and no statistic pretends a failed run was fast.
    """

    representation: str
    strategy: str
    n: int
    transitions: int
    runs: int
    capped: int
    stalled: int
    median: float
    minimum: float
    maximum: float

    @property
    def failed(self) -> int:
        return self.capped + self.stalled


def summarize(results: Sequence[RunResult]) -> list[Summary]:
    groups: dict[tuple[str, str, int], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.representation, result.strategy, result.n), []).append(result)
    summaries = []
    for (representation, strategy, n), runs in sorted(groups.items()):
        updates = np.array([run.updates if run.status == CONVERGED else np.inf for run in runs])
        summaries.append(Summary(
            representation=representation, strategy=strategy, n=n,
            transitions=memory_size(n), runs=len(runs),
            capped=sum(run.status == CAPPED for run in runs),
            stalled=sum(run.status == STALLED for run in runs),
            median=float(np.median(updates)), minimum=float(updates.min()),
            maximum=float(updates.max()),
        ))
    return summaries
