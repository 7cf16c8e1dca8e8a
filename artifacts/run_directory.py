"""The directory a training run writes, and finding such directories below a path:

    runs/<game>/<replay kind>/<date>_<time>/
        config.yaml, changes.yaml (what changed after the start, if anything), provenance.yaml,
        checkpoints/, tensorboard/, agent_latest.pt, agent_best.pt, agent_final.pt

An export of a run (`python -m reporting export`) is a run directory too: its config.yaml, its
provenance.yaml and the CSV files of its scores.
"""

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from artifacts.provenance import PROVENANCE, Provenance, read_starts
from artifacts.upgrade import upgrade_config
from envs.registry import EnvironmentKind, environment_kind

CONFIG = "config.yaml"
CHANGES = "changes.yaml"
CHECKPOINTS = "checkpoints"
TENSORBOARD = "tensorboard"
LATEST_SNAPSHOT = "agent_latest.pt"
BEST_SNAPSHOT = "agent_best.pt"
FINAL_SNAPSHOT = "agent_final.pt"

# The paper's settings, which a variant name leaves out: the schemas' defaults
# (agents/settings.py, replay/settings.py), named here as artifacts may not import replay and
# agents.settings would load torch into every report (tests/artifacts checks they agree).
DEFAULT_TARGET_RULE = "double_dqn"
DEFAULT_PRIORITY_SIGNAL = "td_error"
DEFAULT_EVICTION = "fifo"


def variant_name(
    kind: str,
    target_rule: str = DEFAULT_TARGET_RULE,
    priority_signal: str = DEFAULT_PRIORITY_SIGNAL,
    eviction: str = DEFAULT_EVICTION,
    keep_maximum_step: bool = False,
) -> str:
    """`[<target_rule>-]<kind>[-<priority_signal>][-<eviction>][-keep_maximum_step]`, each
    optional part only where it is not the paper's setting (`dqn-proportional-huber_loss`:
    DQN with Huber-loss priorities; `proportional-keep_maximum_step`: DQN Zoo's η/4)."""
    name = kind
    if priority_signal != DEFAULT_PRIORITY_SIGNAL:
        name += f"-{priority_signal}"
    if eviction != DEFAULT_EVICTION:
        name += f"-{eviction}"
    if keep_maximum_step:
        name += "-keep_maximum_step"
    return name if target_rule == DEFAULT_TARGET_RULE else f"{target_rule}-{name}"


def read_yaml_file(path: Path, what: str):
    """A YAML file's data (a safe load: no tag runs code), or a one-line ValueError."""
    try:
        return yaml.safe_load(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        first = (str(error).strip().splitlines() or ["unreadable"])[0]
        raise ValueError(f"{what} {path} is unreadable: {first}") from None


@dataclass(frozen=True)
class RunDirectory:
    """One run directory: where its files are, and what its config.yaml says."""

    path: Path

    @property
    def config_file(self) -> Path:
        return self.path / CONFIG

    @property
    def changes_file(self) -> Path:
        return self.path / CHANGES

    @property
    def provenance_file(self) -> Path:
        return self.path / PROVENANCE

    @functools.cached_property
    def provenance(self) -> Provenance:
        return Provenance(tuple(read_starts(self.provenance_file) or ()))  # no file: no start

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def tensorboard(self) -> Path:
        return self.path / TENSORBOARD

    @property
    def latest_snapshot(self) -> Path:
        return self.path / LATEST_SNAPSHOT

    @property
    def best_snapshot(self) -> Path:
        return self.path / BEST_SNAPSHOT

    @property
    def final_snapshot(self) -> Path:
        return self.path / FINAL_SNAPSHOT

    @functools.cached_property
    def config(self) -> dict:
        """config.yaml as this version writes it (`artifacts.upgrade`); {} if no mapping."""
        config = read_yaml_file(self.config_file, "run config")
        return upgrade_config(config if isinstance(config, dict) else {})

    @property
    def env(self) -> dict:
        """The env's settings as the run was trained with, its game by its canonical id."""
        return dict(self.config["env"])

    @property
    def game(self) -> str:
        return self.env["game"]

    @property
    def environment_kind(self) -> EnvironmentKind:
        return environment_kind(self.env["kind"])

    @property
    def family(self) -> str:
        """The family of the run's game: "atari" for every Atari kind, "minatar"."""
        return self.environment_kind.family

    def setting(self, section: str, key: str):
        """config.yaml's `section.key`; None where it is absent."""
        values = self.config.get(section)
        return values.get(key) if isinstance(values, dict) else None

    @property
    def target_rule(self) -> str:
        return str(self.setting("agent", "target_rule"))

    @property
    def variant(self) -> str | None:
        """What tells this run apart from the other runs of its game (`variant_name`)."""
        if self.kind is None:
            return None
        return variant_name(
            self.kind,
            self.target_rule,
            str(self.setting("replay", "priority_signal")),
            str(self.setting("replay", "eviction")),
            self.setting("agent", "keep_maximum_step") is True,
        )

    @property
    def kind(self) -> str | None:
        """replay.kind; None in a config.yaml that is not a training run's."""
        replay = self.config.get("replay")
        kind = replay.get("kind") if isinstance(replay, dict) else None
        return None if kind is None else str(kind)

    @property
    def seed(self) -> int | None:
        seed = self.config.get("seed")
        return seed if isinstance(seed, int) else None

    @property
    def total_steps(self) -> int:
        return int(self.config["train"]["total_steps"])

    @property
    def frame_skip(self) -> int:
        return int(self.env["frame_skip"])

    @property
    def total_frames(self) -> int:
        return self.total_steps * self.frame_skip


def find_runs(root: str | os.PathLike) -> list[RunDirectory]:
    """The run directories at or below `root` (a config.yaml with a replay.kind, outside
    dot-directories such as Hydra's .hydra/), sorted by path."""
    root = Path(root)
    runs = []
    for config_file in sorted(root.rglob(CONFIG)):
        if any(part.startswith(".") for part in config_file.relative_to(root).parts[:-1]):
            continue
        run = RunDirectory(config_file.parent)
        if run.kind is not None:
            runs.append(run)
    return runs
