"""The benchmark scripts' modules importable by the tests (`from throughput import
COMPONENTS`), for the names their output is checked against."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
