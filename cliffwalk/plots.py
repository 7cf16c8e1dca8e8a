"""The Blind Cliffwalk results summarized over seeds, and drawn as log-log figures and a
markdown table as in the paper's Figures 1 and 2: number of updates until the MSE is below
10^−3 against the memory size, median line with a faint min–max band over seeds. The same for
every study (`cliffwalk.experiment.Study`): only the strategies and the axis labels differ."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure  # no pyplot: no global state, no display backend

from cliffwalk.experiment import PAPER, RunResult, Study
from cliffwalk.strategies import CAPPED, CONVERGED, STALLED


@dataclass(frozen=True)
class Summary:
    """Median and min–max updates over the seeds of one variant at one n, whose runs all had a
    memory of `transitions` (capacity, for a streaming memory).

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
        summaries.append(
            Summary(
                representation=representation,
                strategy=strategy,
                n=n,
                transitions=runs[0].transitions,
                runs=len(runs),
                capped=sum(run.status == CAPPED for run in runs),
                stalled=sum(run.status == STALLED for run in runs),
                median=float(np.median(updates)),
                minimum=float(updates.min()),
                maximum=float(updates.max()),
            )
        )
    return summaries


# The paper's colours: black uniform, cyan oracle, red rank-based, blue proportional. The
# other signals take one colour each (a panel shows one sampler); the streaming variants
# their sampler's colour, dashed when they forget the lowest priority instead of the oldest.
STYLE = {
    "uniform": ("black", "uniform"),
    "oracle": ("deepskyblue", "oracle"),
    "greedy": ("darkorange", "greedy TD-error"),
    "rank_based": ("red", "rank-based"),
    "proportional": ("blue", "proportional"),
    "proportional:td_error_change": ("forestgreen", "proportional, Δ|δ| between replays"),
    "proportional:parameter_change": ("darkviolet", "proportional, ‖Δθ‖"),
    "rank_based:td_error_change": ("forestgreen", "rank-based, Δ|δ| between replays"),
    "rank_based:parameter_change": ("darkviolet", "rank-based, ‖Δθ‖"),
    "uniform+fifo": ("black", "uniform, forget oldest"),
    "uniform+lowest_priority": ("black", "uniform, forget lowest |δ|"),
    "proportional+fifo": ("blue", "proportional, forget oldest"),
    "proportional+lowest_priority": ("blue", "proportional, forget lowest |δ|"),
}
LINE = {strategy: "--o" for strategy in STYLE if strategy.endswith("+lowest_priority")}


def plot_figure(
    summaries: Sequence[Summary],
    representation: str,
    strategies: Sequence[str],
    title: str,
    path: Path,
    study: Study = PAPER,
) -> None:
    """One panel. Medians and band edges that are ∞ (runs that never converged) are not drawn;
    a hollow marker flags a finite median with some failed runs, the legend says how many.
    `study` names the axes."""
    figure = Figure(figsize=(5.5, 4.2), dpi=110)
    axes = figure.subplots()
    for strategy in strategies:
        rows = sorted(
            (s for s in summaries if (s.representation, s.strategy) == (representation, strategy)),
            key=lambda s: s.n,
        )
        if not rows:
            continue
        colour, label = STYLE[strategy][0], _label(strategy, rows)
        finite = [row for row in rows if math.isfinite(row.median)]
        x = [row.transitions for row in finite]
        axes.plot(
            x,
            [row.median for row in finite],
            LINE.get(strategy, "-o"),
            color=colour,
            label=label,
            markersize=3.5,
            linewidth=1.6,
        )
        banded = [row for row in finite if math.isfinite(row.maximum)]
        axes.fill_between(
            [row.transitions for row in banded],
            [r.minimum for r in banded],
            [row.maximum for row in banded],
            color=colour,
            alpha=0.15,
            linewidth=0,
        )
        partly = [row for row in finite if row.failed]
        axes.plot(
            [row.transitions for row in partly],
            [row.median for row in partly],
            "o",
            markerfacecolor="white",
            color=colour,
            markersize=7,
        )
    _decorate(axes, summaries, title, study)
    figure.tight_layout()
    figure.savefig(path)


def _label(strategy: str, rows: Sequence[Summary]) -> str:
    """The strategy's legend entry, with how many of its runs stalled or hit the cap."""
    endings = [
        (sum(row.stalled for row in rows), "stalled"),
        (sum(row.capped for row in rows), "hit the cap"),
    ]
    label = STYLE[strategy][1]
    if any(count for count, _ in endings):
        total = sum(row.runs for row in rows)
        label += (
            " ("
            + ", ".join(f"{count}/{total} runs {what}" for count, what in endings if count)
            + ")"
        )
    return label


def _decorate(axes, summaries: Sequence[Summary], title: str, study: Study) -> None:
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel(study.memory)
    axes.set_ylabel(study.updates)
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(fontsize=8, loc="upper left")
    memories = dict(sorted({s.n: s.transitions for s in summaries}.items()))
    top = axes.secondary_xaxis("top")
    top.set_xticks(list(memories.values()), labels=[str(n) for n in memories], fontsize=7)
    top.set_xlabel("number of states n", fontsize=8)


def markdown_table(
    summaries: Sequence[Summary],
    representation: str,
    strategies: Sequence[str],
    memory: str = "transitions",
) -> str:
    """Median [min–max] updates per n (rows) and strategy (columns); ∞ stands for runs that
    never converged, and how many capped or stalled is said in the cell. `memory` heads the
    column of the memory size."""
    rows = [s for s in summaries if s.representation == representation]
    memories = dict(sorted({s.n: s.transitions for s in rows}.items()))
    by_key = {(s.strategy, s.n): s for s in rows}
    labels = (STYLE[s][1].replace("|", "\\|") for s in strategies)  # |δ| in a table cell
    header = f"| n | {memory} | " + " | ".join(labels) + " |"
    lines = [header, "|" + "---|" * (2 + len(strategies))]
    for n, transitions in memories.items():
        cells = [_cell(by_key.get((strategy, n))) for strategy in strategies]
        lines.append(f"| {n} | {transitions} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(summary: Summary | None) -> str:
    if summary is None:
        return "–"
    failures = [
        f"{count}/{summary.runs} {what}"
        for count, what in ((summary.capped, "capped"), (summary.stalled, "stalled"))
        if count
    ]
    note = f" ({', '.join(failures)})" if failures else ""
    return (
        f"{_number(summary.median)} [{_number(summary.minimum)}–{_number(summary.maximum)}]{note}"
    )


def _number(value: float) -> str:
    return f"{value:,.0f}" if math.isfinite(value) else "∞"
