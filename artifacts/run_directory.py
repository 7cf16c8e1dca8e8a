"""The directory a training run writes, and finding such directories below a path.

    runs/<game>/<replay kind>/<date>_<time>/
        config.yaml       the fully resolved configuration: the run's record
        changes.yaml      what changed after the start (a setting set on resume, a fallback),
                          only when something did (training.run_record)
        provenance.yaml   the code's commit and the libraries' versions of each start
                          (artifacts.provenance)
        checkpoints/      crash-safe checkpoints to resume from (training.checkpoints)
        tensorboard/      event files
        agent_latest.pt   agent snapshots (artifacts.snapshot): the latest periodic test's agent,
        agent_best.pt     the best one's,
        agent_final.pt    and the last step's, with its target network and optimizer

An export of a run (`python -m reporting export`) is a run directory too: its config.yaml, its
provenance.yaml and the CSV files of its scores.
"""

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from artifacts.provenance import PROVENANCE, Provenance, read_provenance
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
) -> str:
    """`[<target_rule>-]<kind>[-<priority_signal>][-<eviction>]`: each optional part present
    only where it is not the paper's setting, so runs of one game that differ in the agent or
    the replay get distinct names, and a run with the paper's settings is named by its replay
    kind alone (`proportional`; MinAtar's DQN with Huber-loss priorities:
    `dqn-proportional-huber_loss`)."""
    name = kind
    if priority_signal != DEFAULT_PRIORITY_SIGNAL:
        name += f"-{priority_signal}"
    if eviction != DEFAULT_EVICTION:
        name += f"-{eviction}"
    return name if target_rule == DEFAULT_TARGET_RULE else f"{target_rule}-{name}"


def read_yaml_file(path: Path, what: str):
    """A YAML file's data, read with a safe load (no tag runs code); a one-line ValueError
    naming `what` and the file where it cannot be read or is not YAML."""
    try:
        return yaml.safe_load(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        first = (str(error).strip().splitlines() or ["unreadable"])[0]
        raise ValueError(f"{what} {path} is unreadable: {first}") from None


def read_config_file(path: Path):
    """A config.yaml's data (`read_yaml_file`)."""
    return read_yaml_file(path, "run config")


@dataclass(frozen=True)
class RunDirectory:
    """One run directory: where its files are, and what its config.yaml says (read on first
    use, with a YAML safe load: no code runs)."""

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
        """What made the run (`artifacts.provenance`); no start known without the file."""
        return read_provenance(self.provenance_file)

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
        """config.yaml as plain data, as this version writes it (`artifacts.upgrade`); {}
        where it holds no mapping (not a run's)."""
        config = read_config_file(self.config_file)
        return upgrade_config(config if isinstance(config, dict) else {})

    @property
    def env(self) -> dict:
        """The env's settings as the run was trained with (`kind` and its factory's), its
        game by its canonical id."""
        return dict(self.config["env"])

    @property
    def game(self) -> str:
        return self.env["game"]

    @property
    def environment_kind(self) -> EnvironmentKind:
        """env.kind's entry in the registry."""
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
        """What tells this run apart from the other runs of its game (`variant_name`); None
        where `kind` is None."""
        if self.kind is None:
            return None
        return variant_name(
            self.kind,
            self.target_rule,
            str(self.setting("replay", "priority_signal")),
            str(self.setting("replay", "eviction")),
        )

    @property
    def kind(self) -> str | None:
        """replay.kind: "uniform", "rank_based" or "proportional"; None in a config.yaml that
        is not a training run's."""
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
    """The run directories at `root` or below it, sorted by path: those whose config.yaml has a
    replay.kind. Hydra's own records (.hydra/, .submitit/) are not runs, nor is anything else
    below a dot-directory. An unreadable config.yaml is a one-line ValueError."""
    root = Path(root)
    runs = []
    for config_file in sorted(root.rglob(CONFIG)):
        if any(part.startswith(".") for part in config_file.relative_to(root).parts[:-1]):
            continue
        run = RunDirectory(config_file.parent)
        if run.kind is not None:
            runs.append(run)
    return runs
