"""The Blind Cliffwalk results summarized over seeds, drawn as log-log figures and markdown
tables as in the paper's Figures 1 and 2: updates until the MSE is below 10^−3 against the
memory size, the median line with a faint min–max band over seeds."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure  # no pyplot: no global state, no display backend

from cliffwalk.experiment import Panel, RunResult, Study
from cliffwalk.strategies import CAPPED, STALLED


@dataclass(frozen=True)
class Summary:
    """Median and min–max `converged_updates` over the seeds of one variant at one n."""

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


def summarize(results: Sequence[RunResult]) -> list[Summary]:
    groups: dict[tuple[str, str, int], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.representation, result.strategy, result.n), []).append(result)
    summaries = []
    for (representation, strategy, n), runs in sorted(groups.items()):
        updates = np.array([run.converged_updates for run in runs])
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


def plot_figure(summaries: Sequence[Summary], panel: Panel, path: Path, study: Study) -> None:
    """One panel, from `summarize`'s summaries (sorted by n): ∞ medians and band edges are not
    drawn; a hollow marker flags a finite median with some failed runs, the legend says how
    many."""
    figure = Figure(figsize=(5.5, 4.2), dpi=110)
    axes = figure.subplots()
    drawn = [s for s in summaries if s.representation == panel.representation]
    for strategy in panel.strategies:
        rows = [s for s in drawn if s.strategy == strategy]
        if not rows:
            continue
        x, median, low, high, capped, stalled = (
            np.array([getattr(row, key) for row in rows])
            for key in ("transitions", "median", "minimum", "maximum", "capped", "stalled")
        )
        colour, finite, banded = STYLE[strategy][0], np.isfinite(median), np.isfinite(high)
        axes.plot(
            x[finite],
            median[finite],
            "--o" if strategy.endswith("+lowest_priority") else "-o",
            color=colour,
            label=_label(strategy, rows),
            markersize=3.5,
            linewidth=1.6,
        )
        axes.fill_between(
            x[banded], low[banded], high[banded], color=colour, alpha=0.15, linewidth=0
        )
        partly = finite & (capped + stalled > 0)
        axes.plot(
            x[partly], median[partly], "o", markerfacecolor="white", color=colour, markersize=7
        )
    _decorate(axes, summaries, panel.title, study)
    figure.tight_layout()
    figure.savefig(path)


def _label(strategy: str, rows: Sequence[Summary]) -> str:
    total, stalled, capped = np.sum([[row.runs, row.stalled, row.capped] for row in rows], axis=0)
    note = _failed(total, (stalled, "runs stalled"), (capped, "runs hit the cap"))
    return STYLE[strategy][1] + note


def _failed(runs: int, *counts: tuple[int, str]) -> str:
    """The counts that are not 0, each out of `runs`, in brackets after a space ("" if none)."""
    failed = ", ".join(f"{count}/{runs} {what}" for count, what in counts if count)
    return f" ({failed})" if failed else ""


def _decorate(axes, summaries: Sequence[Summary], title: str, study: Study) -> None:
    axes.set_xscale("log", base=2)
    axes.set(yscale="log", xlabel=study.memory, ylabel=study.updates)
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
    """Median [min–max] updates per n (rows) and strategy (columns)."""
    rows = [s for s in summaries if s.representation == representation]
    by_key = {(s.strategy, s.n): s for s in rows}
    labels = (STYLE[s][1].replace("|", "\\|") for s in strategies)  # |δ| in a table cell
    header = f"| n | {memory} | " + " | ".join(labels) + " |"
    lines = [header, "|" + "---|" * (2 + len(strategies))]
    for n, transitions in sorted({(s.n, s.transitions) for s in rows}):
        cells = [_cell(by_key.get((strategy, n))) for strategy in strategies]
        lines.append(f"| {n} | {transitions} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(summary: Summary | None) -> str:
    if summary is None:
        return "–"
    note = _failed(summary.runs, (summary.capped, "capped"), (summary.stalled, "stalled"))
    low, high = _number(summary.minimum), _number(summary.maximum)
    return f"{_number(summary.median)} [{low}–{high}]{note}"


def _number(value: float) -> str:
    return f"{value:,.0f}" if math.isfinite(value) else "∞"
