"""What a run records about what it ran: its whole configuration and the changes made to it
after its start, in every checkpoint, and the changes also in the run directory's
changes.yaml (config.yaml keeps what the run started with).

A change is a setting a resume may change (`CHANGEABLE_ON_RESUME`) given another value, or a
fallback (`FALLBACKS`): a setting the run could not keep, such as `agent.torch_compile` where
compiling fails. On resume the checkpoint's configuration is the authority (`resumed_record`),
so a hand-edited config.yaml is refused rather than trained on.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from artifacts.atomic import write_atomically
from artifacts.run_directory import RunDirectory
from schema import shown
from training.run_state import marked

# Settings a resumed run may change, as they change no result beyond float rounding: a requeued
# job that lands on a GPU where CUDA graphs fail can go on without them.
CHANGEABLE_ON_RESUME = marked("changeable")
# Settings a run may lose while it runs, turned off with the reason (`RunRecord.fall_back`).
FALLBACKS = marked("fallback")
CHANGES_HEADER = (
    "# What changed in this run after it started (config.yaml holds what it started with);\n"
    "# each change holds from its step on.\n"
)


def config_record(cfg: DictConfig) -> dict:
    """The run's configuration as plain data, resolved: what config.yaml and checkpoints hold
    (`resume` is how a command found the run, not part of it)."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.pop("resume", None)
    return resolved


def differences(a, b, prefix: str = "") -> dict[str, tuple]:
    """The dotted keys whose values differ between two nested dicts: key -> (a's, b's); a key
    one of them lacks has None there."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = {}
        for key in sorted(set(a) | set(b)):
            found.update(differences(a.get(key), b.get(key), f"{prefix}{key}."))
        return found
    return {} if a == b else {prefix.rstrip("."): (a, b)}


class RunRecord:
    """The configuration a run runs with now (`config`, as `config_record`) and the changes
    since its start (`changes`: dicts of step, setting, from, to and why, oldest first).

    Invariant: `config` is the configuration the run started with, every change applied in
    order; changes.yaml lists `changes` (no file when there are none)."""

    def __init__(self, run_dir: Path, config: dict, changes: list[dict] | None = None):
        self.path = RunDirectory(run_dir).changes_file
        self.config = copy.deepcopy(config)
        self.changes = list(changes or [])

    def state_dict(self) -> dict:
        return {"config": copy.deepcopy(self.config), "changes": copy.deepcopy(self.changes)}

    def change(self, step: int, key: str, value, why: str) -> str:
        """`key` is `value` from `step` on, for the reason `why`; written by the next `write`.
        Returns the note that says so."""
        *sections, name = key.split(".")
        section = self.config
        for part in sections:
            section = section.setdefault(part, {})
        before = section.get(name)
        section[name] = value
        self.changes.append({"step": step, "setting": key, "from": before, "to": value, "why": why})
        return (
            f"note: {key}={shown(value)} from step {step} on ({shown(before)} before): {why}; "
            f"recorded in {self.path}"
        )

    def fall_back(self, step: int, key: str, cause: str) -> None:
        """The run lost the fallback setting `key` at `step` (turned off) because of `cause`:
        recorded at once, and said on stderr."""
        why = f"{cause}; the run is no longer bit-identical to one that kept {key}=true"
        note = self.change(step, key, False, why)
        self.write()
        tqdm.write(note, file=sys.stderr)  # above a training run's progress bar

    def write(self) -> None:
        """changes.yaml as `changes` says: written anew, or removed where there are none (a run
        resumed from before its last change cuts it, as it cuts its events)."""
        if not self.changes:
            self.path.unlink(missing_ok=True)
            return
        text = yaml.safe_dump(self.changes, sort_keys=False, width=100)
        write_atomically(self.path, (CHANGES_HEADER + text).encode())


def resumed_record(run_dir: Path, cfg: DictConfig, checkpoint: dict) -> tuple[RunRecord, list[str]]:
    """The record of a run resumed from `checkpoint` with `cfg` (its config.yaml with this
    command's overrides), and the notes that tell what differs from the run so far. Refuses, in
    one line naming the key and both values, a setting that differs from the configuration the
    checkpoint was written with, unless a resume may change it (then it is recorded as a change
    at the checkpoint's step) or a fallback changed it (then `cfg` takes the checkpoint's value:
    the run goes on as it ran). A checkpoint from before configurations were recorded is taken
    to agree (only its shape keys could be checked: `training.run_state.resumable`)."""
    state, step, here = checkpoint["state"], int(checkpoint["step"]), config_record(cfg)
    if state["config"] is None:
        note = (
            f"note: checkpoint {checkpoint['path'].name} was written before checkpoints held "
            "the run's whole config: only the settings that shape its state were checked"
        )
        return RunRecord(run_dir, here), [note]
    record = RunRecord(run_dir, state["config"], state["changes"])
    fallen = {change["setting"] for change in record.changes if change["setting"] in FALLBACKS}
    notes = [
        f"note: {change['setting']}={shown(change['to'])} since step {change['step']} "
        f"({change['why']})"
        for change in record.changes
        if change["setting"] in fallen
    ]
    for key, (there, given) in differences(record.config, here).items():
        if key in fallen:
            OmegaConf.update(cfg, key, there)
        elif key in CHANGEABLE_ON_RESUME:
            notes.append(record.change(step, key, given, "set when the run was resumed"))
        else:
            raise ValueError(
                f"{RunDirectory(run_dir).config_file} has {key}={shown(given)}, but the run ran "
                f"with {key}={shown(there)} (checkpoint {checkpoint['path'].name}): a resumed run "
                "keeps its config; restore config.yaml"
            )
    return record, notes
