"""Log-log figures and a markdown table of the Blind Cliffwalk results, as in the paper's
Figures 1 and 2: number of updates until the MSE is below 10^−3 against the memory size,
median line with a faint min–max band over seeds."""

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure  # no pyplot: no global state, no display backend

from cliffwalk.env import memory_size
from cliffwalk.experiment import Summary

# The paper's colours: black uniform, cyan oracle, red rank-based, blue proportional.
STYLE = {
    "uniform": ("black", "uniform"),
    "oracle": ("deepskyblue", "oracle"),
    "greedy": ("darkorange", "greedy TD-error"),
    "rank_based": ("red", "rank-based"),
    "proportional": ("blue", "proportional"),
}


def plot_figure(summaries: Sequence[Summary], representation: str, strategies: Sequence[str],
                title: str, path: Path) -> None:
    """One panel. Medians and band edges that are ∞ (runs that never converged) are not drawn;
    a hollow marker flags a finite median with some failed runs, the legend says how many."""
    figure = Figure(figsize=(5.5, 4.2), dpi=110)
    axes = figure.subplots()
    for strategy in strategies:
        rows = sorted((s for s in summaries if (s.representation, s.strategy)
                       == (representation, strategy)), key=lambda s: s.n)
        if not rows:
            continue
        colour, label = STYLE[strategy]
        endings = [(sum(row.stalled for row in rows), "stalled"),
                   (sum(row.capped for row in rows), "hit the cap")]
        if any(count for count, _ in endings):
            total = sum(row.runs for row in rows)
            label += " (" + ", ".join(f"{count}/{total} runs {what}"
                                      for count, what in endings if count) + ")"
        finite = [row for row in rows if math.isfinite(row.median)]
        x = [row.transitions for row in finite]
        axes.plot(x, [row.median for row in finite], "-o", color=colour, label=label,
                  markersize=3.5, linewidth=1.6)
        banded = [row for row in finite if math.isfinite(row.maximum)]
        axes.fill_between([row.transitions for row in banded], [r.minimum for r in banded],
                          [row.maximum for row in banded], color=colour, alpha=0.15, linewidth=0)
        partly = [row for row in finite if row.failed]
        axes.plot([row.transitions for row in partly], [row.median for row in partly], "o",
                  markerfacecolor="white", color=colour, markersize=7)
    _decorate(axes, summaries, title)
    figure.tight_layout()
    figure.savefig(path)


def _decorate(axes, summaries: Sequence[Summary], title: str) -> None:
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("transitions in replay memory, 2^(n+1) − 2")
    axes.set_ylabel("updates until MSE < 10⁻³")
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(fontsize=8, loc="upper left")
    ns = sorted({s.n for s in summaries})
    top = axes.secondary_xaxis("top")
    top.set_xticks([memory_size(n) for n in ns], labels=[str(n) for n in ns], fontsize=7)
    top.set_xlabel("number of states n", fontsize=8)


def markdown_table(summaries: Sequence[Summary], representation: str,
                   strategies: Sequence[str]) -> str:
    """Median [min–max] updates per n (rows) and strategy (columns); ∞ stands for runs that
    never converged, and how many capped or stalled is said in the cell."""
    ns = sorted({s.n for s in summaries if s.representation == representation})
    by_key = {(s.strategy, s.n): s for s in summaries if s.representation == representation}
    header = "| n | transitions | " + " | ".join(STYLE[s][1] for s in strategies) + " |"
    lines = [header, "|" + "---|" * (2 + len(strategies))]
    for n in ns:
        cells = [_cell(by_key.get((strategy, n))) for strategy in strategies]
        lines.append(f"| {n} | {memory_size(n)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(summary: Summary | None) -> str:
    if summary is None:
        return "–"
    failures = [f"{count}/{summary.runs} {what}" for count, what in
                ((summary.capped, "capped"), (summary.stalled, "stalled")) if count]
    note = f" ({', '.join(failures)})" if failures else ""
    return (f"{_number(summary.median)} [{_number(summary.minimum)}–"
            f"{_number(summary.maximum)}]{note}")


def _number(value: float) -> str:
    return f"{value:,.0f}" if math.isfinite(value) else "∞"
