"""The requirements to download for an install without network (docs/gpu.md): those of the
project and of every extra, one a line, but torch (the machine's own build) and the project.

    python scripts/offline_requirements.py > requirements-offline.txt
"""

import re
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
LEFT_OUT = {"torch", "per-atari"}


def requirement_name(requirement: str) -> str:
    """The distribution a requirement line names, normalized (PEP 503)."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)
    return re.sub(r"[-_.]+", "-", name).lower()


def offline_requirements(pyproject: dict) -> list[str]:
    """The `project` table's dependencies and every extra's, in file order, each once."""
    project = pyproject["project"]
    extras = project.get("optional-dependencies", {}).values()
    every = [*project["dependencies"], *(r for extra in extras for r in extra)]
    return list(dict.fromkeys(r for r in every if requirement_name(r) not in LEFT_OUT))


def main() -> None:
    import tomllib  # Python 3.11+: run it with a Python that has it, any will do

    pyproject = tomllib.loads(PROJECT.read_text("utf-8"))
    sys.stdout.write("".join(f"{line}\n" for line in offline_requirements(pyproject)))


if __name__ == "__main__":
    main()
