"""Imports between the project's packages run one way, checked on the source with `ast`:
imports inside functions and under `if TYPE_CHECKING:` count, relative ones are resolved."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> the packages it must not import; README.md ("How it is built") mirrors this table.
FORBIDDEN = {
    "agents": {"training", "evaluation", "reporting", "cliffwalk", "artifacts"},
    "replay": {"training", "evaluation", "reporting", "cliffwalk", "artifacts"},
    # envs may import artifacts: start-state files carry its format/version header.
    "envs": {"training", "evaluation", "reporting", "cliffwalk"},
    "artifacts": {"training", "evaluation", "reporting", "replay"},
    "evaluation": {"training", "replay"},
    "reporting": {"training", "replay"},
    "cliffwalk": {"training", "evaluation", "reporting"},
    "training": {"reporting", "cliffwalk"},
}


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in the file at `path`."""
    package = path.relative_to(root).parent.parts
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) + 1 - node.level]) if node.level else []
            found.append((node.lineno, ".".join([*base, *filter(None, [node.module])])))
    return found


def violations(root: Path, package: str) -> list[str]:
    """'file:line imports module (package must not import ...)', one per forbidden import."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path, root):
            if module.split(".")[0] in FORBIDDEN[package]:
                found.append(
                    f"{path.relative_to(root)}:{line} imports {module} ({package} must not "
                    f"import {', '.join(sorted(FORBIDDEN[package]))})"
                )
    return found


def test_every_package_has_a_rule():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert set(project["tool"]["setuptools"]["packages"]) == set(FORBIDDEN)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_run_in_the_intended_direction(package):
    found = violations(ROOT, package)
    assert not found, "\n".join(found)


def test_the_check_sees_relative_and_nested_imports(tmp_path):
    (tmp_path / "evaluation").mkdir()
    (tmp_path / "evaluation" / "__init__.py").write_text("from . import runs\n")
    (tmp_path / "evaluation" / "runs.py").write_text(
        "import envs.games\n"
        "from ..training import checkpoints\n"
        "def read():\n"
        "    from replay.buffer import ReplayBuffer\n"
    )
    assert [line.split(" (")[0] for line in violations(tmp_path, "evaluation")] == [
        "evaluation/runs.py:2 imports training",
        "evaluation/runs.py:4 imports replay.buffer",
    ]
