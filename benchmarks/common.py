"""What the benchmarks share: the checkout on the import path, timing, memory and tables."""

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the project runs from its checkout (docs/checkout.md)


def median_us(function, repeats: int) -> float:
    """The median µs of `repeats` calls of `function`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def process_bytes(field: str) -> int:
    """A /proc/self/status figure in bytes: VmRSS now, or VmHWM, the peak since its reset."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def load_averages(loads: list) -> str:
    """os.getloadavg()'s figures, taken before and after."""
    return ", ".join(" ".join(f"{x:.2f}" for x in each) for each in loads) + " (before, after)"


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown(head: list[str], body: list[list[str]]) -> str:
    """A table: its head, its first column left-aligned and the others right-aligned."""
    return "\n".join(map(row, [head, ["---"] + ["---:"] * (len(head) - 1), *body]))
