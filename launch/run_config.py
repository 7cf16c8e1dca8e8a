"""The config a run runs with, and its record in the run directory (Hydra's side of train.py).

A resumed run keeps its stored config, except the settings in `CHANGEABLE_ON_RESUME`
(`training.run_record`, which also checks config.yaml against the checkpoint); a new
run in an existing directory must have the same one, with the same exception; config.yaml is
written only once the run is built, so a command that fails leaves no record of a run that
never started, and it keeps the values the run started with.
"""

import shlex
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Quote, QuotedString
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from artifacts.atomic import write_atomically
from artifacts.provenance import read_starts, this_start, with_start
from artifacts.run_directory import RunDirectory, read_yaml_file
from artifacts.upgrade import upgrade_config
from launch.run_guard import RunDirectoryError, check_disk, check_machine, check_memory
from launch.validation import validate_config
from replay.registry import sampler_class
from schema import shown
from training.run_record import CHANGEABLE_ON_RESUME, config_record, differences
from training.settings import Run

# Each run directory's deepest ancestor (or itself) that existed before Hydra made it with
# `mkdir -p`, which creates exactly the directories below that one
# (`note_existing_directories`, `remove_created_directories`).
_EXISTED: dict[Path, Path] = {}


def load_stored_config(path: Path) -> DictConfig:
    """A run's config.yaml as this version writes it (`artifacts.upgrade`); a one-line
    ValueError where it cannot be read, is not YAML, or holds no settings (empty)."""
    stored = read_yaml_file(path, "run config")
    if stored is None or stored == {}:
        raise ValueError(f"run config {path} is empty: it holds no settings")
    if not isinstance(stored, dict):
        raise ValueError(
            f"run config {path} holds a {type(stored).__name__}, not the run's settings"
        )
    return OmegaConf.create(upgrade_config(stored))


def check_run_directory(run_dir: Path, cfg: DictConfig) -> None:
    """A run directory that holds a run must hold this config's (`record_run_config` writes
    it once the run is built)."""
    path = RunDirectory(run_dir).config_file
    if not path.exists():
        return
    existing = OmegaConf.to_container(load_stored_config(path))
    existing.pop("resume", None)
    found = differences(existing, config_record(cfg))
    found = {key: both for key, both in found.items() if key not in CHANGEABLE_ON_RESUME}
    if found:
        key, (there, here) = next(iter(found.items()))
        raise RunDirectoryError(
            f"run directory {run_dir} holds a different run: {key} is {shown(there)} there, "
            f"{shown(here)} here"
        )


def _plain(value):
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def run_config(cfg: DictConfig) -> DictConfig:
    """The config to run: `cfg`, or with `resume` the resumed run's own, which every
    command-line override must agree with."""
    if cfg.resume is None:
        return cfg
    path = RunDirectory(Path(cfg.resume)).config_file
    if not path.is_file():
        raise RunDirectoryError(f"resume={cfg.resume} is not a run directory: no {path.name}")
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if run_dir.resolve() != path.parent.resolve():
        raise RunDirectoryError(
            f"resume={cfg.resume} with hydra.run.dir={run_dir} is not allowed: a resumed run "
            "continues in its own directory"
        )
    stored = load_stored_config(path)
    for override in HydraConfig.get().overrides.task:
        key = override.split("=", 1)[0].lstrip("+~")
        if key == "resume" or key.startswith("hydra"):
            continue
        if key in CHANGEABLE_ON_RESUME:
            OmegaConf.update(stored, key, OmegaConf.select(cfg, key))
            continue
        there, here = (_plain(OmegaConf.select(c, key)) for c in (stored, cfg))
        if there != here:
            raise RunDirectoryError(
                f"resume={cfg.resume}: the run has {key}={shown(there)}; a resumed run keeps its "
                "config"
            )
    stored.resume = cfg.resume
    return stored


def shell_override(key: str, value) -> str:
    """`key=value` as one shell word that Hydra's override parser reads back as the string
    `value`: a value its grammar would read otherwise (a comma makes a sweep, `=` or a quote
    is refused, `1` is a number) is quoted for it first, then the word for the shell (a
    space, a quote, a `$`)."""
    text = str(value)
    try:
        override = OverridesParser.create().parse_override(f"{key}={text}")
        plain = not override.is_sweep_override() and override.value() == text
    except HydraException:
        plain = False
    if not plain:
        quote = Quote.single if '"' in text else Quote.double
        text = QuotedString(text=text, quote=quote).with_quotes()
    return shlex.quote(f"{key}={text}")


def record_run_config(run_dir: Path, cfg: DictConfig, derived: list[str]) -> None:
    """Write the run's record, config.yaml, unless it is there: only for a run that starts.
    `derived` (what the run uses that the config holds only as inputs) heads it as comments,
    which loading it ignores."""
    path = RunDirectory(run_dir).config_file
    if not path.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        header = "".join(f"# {line}\n" for line in derived)
        write_atomically(path, (header + OmegaConf.to_yaml(config_record(cfg))).encode())


def record_start(run_dir: Path, step: int) -> None:
    """Add this start of the run, at agent step `step` (its first, 0, or the checkpoint it
    resumed from), to its provenance.yaml: the code's commit, the libraries' versions
    (`artifacts.provenance`). Only once the run has started: a refused resume leaves the
    file as it was."""
    path = RunDirectory(run_dir).provenance_file
    write_atomically(path, with_start(read_starts(path), this_start(step)).encode())


def note_existing_directories(run_dir: Path) -> None:
    """Note, before Hydra makes `run_dir`, the deepest of it and its ancestors that exists."""
    run_dir = run_dir.absolute()
    _EXISTED[run_dir] = next(path for path in (run_dir, *run_dir.parents) if path.exists())


class NoteExistingDirectories(Callback):
    """Hydra calls it before it makes a single run's directory (`hydra.run.dir`). A sweep's
    jobs are checked before the sweep makes anything (`launch.sweep_checks`); a job that its
    own process refuses later (on a cluster's node) cannot know what existed before the sweep
    and removes nothing."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        note_existing_directories(Path(str(config.hydra.run.dir)))


def remove_created_directories(run_dir: Path) -> None:
    """Undo Hydra's `mkdir -p` of the run directory for a refused run: remove it and then its
    parents while they are empty and lie below the deepest one that existed before
    (`note_existing_directories`; where none was noted, nothing is removed). A directory made
    before the command stays, empty or not."""
    run_dir = run_dir.absolute()
    existed = _EXISTED.get(run_dir, run_dir)
    directory = run_dir
    while directory != existed and directory.is_relative_to(existed):
        try:
            if any(directory.iterdir()):
                return
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def check_run(
    cfg: DictConfig, run_dir: Path, replay_group: str | None, this_machine: bool = True
) -> tuple[Run, bool]:
    """Every check of a run's config before anything is built, in train.py and, for each job,
    before a sweep starts: the replay group of a fresh run (first: with another group's kind
    its settings are another sampler's), the settings, for a run that will run on this
    machine what the machine allows them, the game (resolved to its id in `cfg`), the run
    directory and, for a run that will run on this machine and is not finished, the memory
    its replay and the disk its checkpoints need. Returns the run's settings and whether the run
    is finished: its final snapshot, the last file a run writes (`training.loop`), exists,
    whatever its checkpoints (deleted to free the disk, or two left by a stop in its last
    step's cleanup); resuming it would only rewrite its results. A refusal is a one-line
    ValueError."""
    if cfg.resume is None and replay_group is not None:
        # A fresh run's replay.kind must be the sampler of the replay group it composed: a
        # kind set alone would run one sampler with another's α, β and step size.
        kind = OmegaConf.select(cfg, "replay.kind")
        sampler_class(kind)  # a kind no sampler has is refused as such
        if kind != replay_group:
            raise ValueError(
                f"replay.kind={kind} is not allowed with replay={replay_group}: choose the "
                f"sampler and its settings together with replay={kind}"
            )
    settings = validate_config(cfg)
    run = RunDirectory(run_dir)
    done = run.final_snapshot.is_file()
    if this_machine:
        check_machine(settings)
    if this_machine and not done:
        check_memory(settings)
    cfg.env.game = settings.env.game  # the stored config names the game by its id too
    check_run_directory(run_dir, cfg)
    if this_machine and not done:
        check_disk(settings, run.checkpoints)
    return settings, done
