"""The cells of the reports' markdown tables: every report writes a number the same way, and an
absent one (None or NaN) as –."""

import numpy as np


def format_score(value: float | None) -> str:
    return "–" if value is None or np.isnan(value) else f"{value:.1f}"


def format_percent(value: float | None) -> str:
    return "–" if value is None or np.isnan(value) else f"{100 * value:.1f} %"


def format_interval(value: float, low: float, high: float) -> str:
    """`value [low, high]`, each as `format_score` writes it."""
    return f"{format_score(value)} [{format_score(low)}, {format_score(high)}]"


def format_mean_error(mean: float, error: float) -> str:
    """`mean ± error`, each as `format_score` writes it."""
    return f"{format_score(mean)} ± {format_score(error)}"


def markdown_row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def report_end(figures, provenances, notes) -> str:
    """The end of every report, after its `## Figures` heading: the figures' images, the code
    that made the runs (`code_section`), the runs left out and why; ends with a newline."""
    lines = [*[f"![{name}]({name})" for name in figures], "", *code_section(provenances)]
    if notes:
        lines += ["", "## Left out", "", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def code_section(provenances) -> list[str]:
    """A report's `## Code` section: each distinct code and set of library versions among the
    runs' `artifacts.provenance.Provenance`, with how many runs it made."""
    counts: dict[tuple[str, str], int] = {}
    for provenance in provenances:
        key = (provenance.code, provenance.libraries)
        counts[key] = counts.get(key, 0) + 1
    return [
        "## Code",
        "",
        "What made the runs (each run's provenance.yaml): the project's commit at each start "
        "of the run, `-dirty` where tracked files differed from it, and the libraries' "
        "versions; `unknown` for a run, or the part of one, made before runs recorded this.",
        "",
        "| code | libraries | runs |",
        "|---|---|---|",
        *[markdown_row([code, libraries, str(n)]) for (code, libraries), n in counts.items()],
    ]
