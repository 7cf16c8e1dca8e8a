"""Finding what to evaluate: a snapshot file, a run directory (`artifacts.run_directory`) or a
multirun directory, any directory with run directories below it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from artifacts.run_directory import BEST_SNAPSHOT, CONFIG, LATEST_SNAPSHOT, RunDirectory, find_runs
from envs.registry import DEFAULT_KIND

SNAPSHOT_NAMES = {"best": BEST_SNAPSHOT, "latest": LATEST_SNAPSHOT}
# A snapshot outside a run directory has no config: it plays the paper's env, its game the
# snapshot's (filled in on loading).
BARE_SNAPSHOT_ENV = {"kind": DEFAULT_KIND}


@dataclass(frozen=True)
class RunSpec:
    """One snapshot to evaluate, with the env it was trained on."""

    name: str  # a label: the run directory relative to the evaluated path, or the file name
    snapshot: Path
    env_kwargs: dict  # the run config's env section (`BARE_SNAPSHOT_ENV` outside a run)
    variant: str  # `RunDirectory.variant` (e.g. "proportional", "dqn-uniform") or "unknown"
    seed: int | None
    test_epsilon: float | None = None  # the ε of the run's periodic test (evaluation.epsilon)

    @property
    def env_kind(self) -> str:
        return self.env_kwargs["kind"]


def find_snapshots(
    path: str | Path, snapshot: str = "best", names: dict[str, str] = SNAPSHOT_NAMES
) -> list[RunSpec]:
    """The snapshots under ``path`` (``names``: a snapshot's file in a run directory), runs
    without one skipped with a note; a one-line ValueError when nothing can be evaluated."""
    path = Path(path)
    file_name = names[snapshot]
    if path.is_file():
        return [_spec(RunDirectory(path.parent), path, path.name)]
    if not path.is_dir():
        raise ValueError(
            f"{path} does not exist: give a snapshot (.pt), a run directory or a multirun directory"
        )
    if RunDirectory(path).config_file.is_file():
        if not (path / file_name).is_file():
            present = ", ".join(sorted(p.name for p in path.glob("*.pt"))) or "none"
            raise ValueError(
                f"run directory {path} has no {file_name} (snapshot={snapshot}); "
                f"snapshots present: {present}"
            )
        return [_spec(RunDirectory(path), path / file_name, path.name)]
    specs = []
    for run in find_runs(path):
        if not (run.path / file_name).is_file():
            print(f"note: skipping {run.path}: no {file_name}", file=sys.stderr)
            continue
        specs.append(_spec(run, run.path / file_name, str(run.path.relative_to(path))))
    if not specs:
        raise ValueError(f"no run directory with {CONFIG} and {file_name} under {path}")
    return specs


def _spec(run: RunDirectory, snapshot: Path, name: str) -> RunSpec:
    if not run.config_file.is_file():
        return RunSpec(name, snapshot, dict(BARE_SNAPSHOT_ENV), "unknown", None)
    epsilon = run.setting("evaluation", "epsilon")
    if type(epsilon) not in (int, float) or not 0 <= epsilon <= 1:
        epsilon = None  # not a training run's config: the protocol's own ε applies
    test_epsilon = None if epsilon is None else float(epsilon)
    return RunSpec(name, snapshot, run.env, run.variant or "unknown", run.seed, test_epsilon)
