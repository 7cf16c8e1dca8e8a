"""Finding what to evaluate: a snapshot file, a run directory or a multirun directory.

A run directory (made by train.py) holds ``config.yaml`` (the resolved config: ``env.*`` are
make_env's arguments, ``seed``, ``replay.kind``) and the snapshots ``agent_best.pt`` (the best
agent of the periodic test evaluations, the one the human-starts protocol evaluates) and
``agent_latest.pt``. A multirun directory is any directory with run directories below it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from envs.games import resolve_game

SNAPSHOT_NAMES = {"best": "agent_best.pt", "latest": "agent_latest.pt"}
CONFIG_NAME = "config.yaml"


@dataclass(frozen=True)
class RunSpec:
    """One snapshot to evaluate, with the env it was trained on."""

    name: str  # a label: the run directory relative to the evaluated path, or the file name
    snapshot: Path
    env_kwargs: dict  # make_env's arguments; always has "game"
    variant: str  # replay.kind ("uniform", "rank_based", "proportional") or "unknown"
    seed: int | None


def find_runs(path: str | Path, snapshot: str = "best") -> list[RunSpec]:
    """The runs under ``path``: a snapshot file, one run directory, or every run directory
    below a multirun directory (runs without the snapshot are skipped with a note on stderr).
    Raises a one-line ValueError when nothing can be evaluated."""
    path = Path(path)
    if snapshot not in SNAPSHOT_NAMES:
        raise ValueError(
            f"snapshot={snapshot} is not allowed: must be one of {', '.join(SNAPSHOT_NAMES)}"
        )
    file_name = SNAPSHOT_NAMES[snapshot]
    if path.is_file():
        return [_run(path.parent, path, path.name)]
    if not path.is_dir():
        raise ValueError(
            f"{path} does not exist: give a snapshot (.pt), a run directory or a multirun directory"
        )
    if (path / CONFIG_NAME).is_file():
        if not (path / file_name).is_file():
            present = ", ".join(sorted(p.name for p in path.glob("*.pt"))) or "none"
            raise ValueError(
                f"run directory {path} has no {file_name} (snapshot={snapshot}); "
                f"snapshots present: {present}"
            )
        return [_run(path, path / file_name, path.name)]
    runs = []
    for config in sorted(path.rglob(CONFIG_NAME)):
        run_dir = config.parent
        if run_dir.name == ".hydra":  # Hydra's own copy of the unresolved config
            continue
        if not (run_dir / file_name).is_file():
            print(f"note: skipping {run_dir}: no {file_name}", file=sys.stderr)
            continue
        runs.append(_run(run_dir, run_dir / file_name, str(run_dir.relative_to(path))))
    if not runs:
        raise ValueError(f"no run directory with {CONFIG_NAME} and {file_name} under {path}")
    return runs


def read_run_config(run_dir: Path) -> dict:
    """``config.yaml`` as plain data (YAML safe load: no code runs)."""
    config_path = run_dir / CONFIG_NAME
    try:
        config = yaml.safe_load(config_path.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as error:
        first = (str(error).strip().splitlines() or ["unreadable"])[0]
        raise ValueError(f"run config {config_path} is unreadable: {first}") from None
    if not isinstance(config, dict) or not isinstance(config.get("env"), dict):
        raise ValueError(f"run config {config_path} has no 'env' section (is it train.py's?)")
    return config


def _run(run_dir: Path, snapshot: Path, name: str) -> RunSpec:
    if (run_dir / CONFIG_NAME).is_file():
        config = read_run_config(run_dir)
        env_kwargs = dict(config["env"])
        variant = str((config.get("replay") or {}).get("kind", "unknown"))
        seed = config.get("seed")
    else:  # a bare snapshot: the paper's env for the snapshot's game (filled in on loading)
        env_kwargs, variant, seed = {}, "unknown", None
    if "game" in env_kwargs:
        env_kwargs["game"] = resolve_game(str(env_kwargs["game"])).rom_id
    return RunSpec(name, snapshot, env_kwargs, variant, seed if isinstance(seed, int) else None)
