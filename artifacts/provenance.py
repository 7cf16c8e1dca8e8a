"""What made a run: the code and the libraries of each of its starts, in its provenance.yaml:

    starts:
    - {step: 0, time: '2026-11-27T11:21:14Z', commit: 84135fb..., dirty: false, python: 3.11.2,
       torch: 2.13.0+cpu, numpy: 2.3.1, ale-py: 0.12.1, minatar: 1.0.15}

train.py appends a start each time a run starts or resumes; `commit` and `dirty` are null where
the code is no git checkout, a library's version null where it is not installed. A run from
before runs recorded this has no file: its code is unknown, and nothing here guesses it.
"""

import platform
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import yaml

PROVENANCE = "provenance.yaml"
LIBRARIES = ("torch", "numpy", "ale-py", "minatar")
UNKNOWN = "unknown"
SHORT_COMMIT = 7
NOT_RECORDED = (
    "# Not recorded: the run was made before runs recorded the code and libraries that made it.\n"
)
_PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _git(root: Path, *arguments: str) -> str | None:
    """git's output in `root`, stripped; None where git or the repository is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def code_state(root: Path = _PROJECT_ROOT) -> tuple[str | None, bool | None]:
    """(commit, whether a tracked file differs from it) of the code at `root`; None, None unless
    `root` is the top of a git work tree (a copy inside another repository is not its commit)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != Path(root).resolve():
        return None, None
    commit = _git(root, "rev-parse", "HEAD")
    changes = _git(root, "status", "--porcelain", "--untracked-files=no")
    if commit is None or changes is None:
        return None, None
    return commit, bool(changes)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def this_start(step: int, root: Path = _PROJECT_ROOT) -> dict:
    commit, dirty = code_state(root)
    return {
        "step": step,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "dirty": dirty,
        "python": platform.python_version(),
        **{library: _version(library) for library in LIBRARIES},
    }


def read_starts(path: Path) -> list[dict] | None:
    """The starts recorded in the provenance file at `path`; None without the file."""
    if not path.is_file():
        return None
    recorded = yaml.safe_load(path.read_text("utf-8")) or {}
    starts = recorded.get("starts") if isinstance(recorded, dict) else None
    return [start for start in starts or [] if isinstance(start, dict)]


def with_start(starts: list[dict] | None, start: dict) -> str:
    """The file's text with `start` appended to `starts`."""
    return yaml.safe_dump({"starts": [*(starts or []), start]}, sort_keys=False)


@dataclass(frozen=True)
class Provenance:
    """A run's recorded starts, as a report names them."""

    starts: tuple[dict, ...]

    @property
    def complete(self) -> bool:
        """Whether the code is known from the run's first step on."""
        return bool(self.starts) and self.starts[0].get("step") == 0

    @property
    def code(self) -> str:
        """The short commits in the order they ran the run, `-dirty` after one that differed
        from its commit, `unknown` for a stretch without a record."""
        names = [] if self.complete else [UNKNOWN]
        for start in self.starts:
            commit = start.get("commit")
            name = UNKNOWN if not commit else str(commit)[:SHORT_COMMIT]
            name += "-dirty" if commit and start.get("dirty") else ""
            if not names or names[-1] != name:
                names.append(name)
        return ", ".join(names)

    @property
    def libraries(self) -> str:
        """python and the LIBRARIES at each distinct set of versions, `;` between sets."""
        versions = []
        for start in self.starts:
            listed = ", ".join(
                f"{name} {start.get(name)}" for name in ("python", *LIBRARIES) if start.get(name)
            )
            if listed not in versions:
                versions.append(listed)
        return "; ".join(versions) or UNKNOWN


def code_of(provenances: Iterable[Provenance]) -> str:
    """The distinct `Provenance.code` of several runs, in order, `;` between them."""
    return "; ".join(dict.fromkeys(provenance.code for provenance in provenances))
