"""What the benchmarks share: the checkout's path, command lines, timing, tables."""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the project runs from its checkout (docs/checkout.md)
THROUGHPUT = ROOT / "benchmarks" / "throughput.py"


def command_line(doc: str, overrides: str = "") -> argparse.ArgumentParser:
    """A benchmark's options: the first line of its docstring, then each option's default;
    given `overrides`, Hydra overrides (KEY=VALUE...) for that run come first."""
    parser = argparse.ArgumentParser(
        description=doc.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    if overrides:
        parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help=overrides)
    return parser


def timed(function, spent):
    """`function`, handing the seconds of each of its calls to `spent`."""

    def timed_function(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent(time.perf_counter() - start)

    return timed_function


def median_us(function, repeats: int) -> float:
    """The median µs of `repeats` calls of `function`."""
    times = []
    call = timed(function, times.append)
    for _ in range(repeats):
        call()
    return statistics.median(times) * 1e6


def load_averages(loads: list) -> str:
    """os.getloadavg()'s figures, taken before and after."""
    return ", ".join(" ".join(f"{x:.2f}" for x in each) for each in loads) + " (before, after)"


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown(head: list[str], body: list[list[str]]) -> str:
    """A table: its head, its first column left-aligned and the others right-aligned."""
    return "\n".join(map(row, [head, ["---"] + ["---:"] * (len(head) - 1), *body]))
