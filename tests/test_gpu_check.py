"""The GPU check, `python -m pytest -k cuda`, where it has to run: it collects on a machine
without any optional extra (a test module of an extra skips without it), and on a GPU machine
it spends no time on the CPU-only bad-input cases and their module fixture. Pytest runs in a
child process where the extras cannot be imported, or where torch reports a GPU."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The top-level modules of the optional extras (pyproject.toml): slurm, joblib, minatar, play,
# iqm. scipy is left: `dev` needs it itself.
EXTRAS = (
    "submitit",
    "hydra_plugins.hydra_submitit_launcher",
    "hydra_plugins.hydra_joblib_launcher",
    "minatar",
    "pygame",
    "rliable",
    "arch",
    "pandas",
)
# argv: the modules made unimportable (comma-separated, may be empty), "gpu" or "cpu", then
# pytest's arguments. Prints the fixtures set up and the outcome of each test as JSON.
RUNNER = """
import importlib.abc, json, sys
import pytest, torch

blocked, device, *arguments = sys.argv[1].split(",") if sys.argv[1] else [], *sys.argv[2:]

class Unimportable(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == module or name.startswith(module + ".") for module in blocked):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

class Recorder:
    fixtures, outcomes = [], {}
    def pytest_fixture_setup(self, fixturedef):
        self.fixtures.append(fixturedef.argname)
    def pytest_runtest_logreport(self, report):
        if report.when == "setup" and report.skipped or report.when == "call":
            self.outcomes[report.nodeid] = report.outcome

sys.meta_path.insert(0, Unimportable())
if device == "gpu":
    torch.cuda.is_available = lambda: True
recorder = Recorder()
status = pytest.main(["-p", "no:cacheprovider", "-q", *arguments], plugins=[recorder])
print(json.dumps({"status": int(status), "fixtures": recorder.fixtures,
                  "outcomes": recorder.outcomes}))
"""


def pytest_in_child(blocked: tuple[str, ...], device: str, *arguments: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, ",".join(blocked), device, *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_gpu_check_collects_without_any_optional_extra():
    collected = pytest_in_child(EXTRAS, "cpu", "--collect-only", "-k", "cuda")
    assert collected["status"] == 0  # pytest's "interrupted" (2) where a module fails to import


def test_on_a_gpu_the_bad_input_module_skips_its_cuda_case_before_any_fixture():
    """With a GPU, `agent.device=cuda` is valid input; its case is skipped before the module's
    fixture would run a finished run and every other case (44 train.py processes)."""
    checked = pytest_in_child((), "gpu", "tests/test_bad_input.py", "-k", "cuda")
    assert checked["outcomes"] == {
        "tests/test_bad_input.py::test_cuda_without_a_gpu_is_refused_with_one_line_and_changes_"
        "nothing": "skipped"
    }
    assert checked["fixtures"] == []
