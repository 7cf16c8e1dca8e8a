"""Imports between the project's packages run one way, and no modules import each other in a
circle; checked on the source with `ast`: imports inside functions and under
`if TYPE_CHECKING:` count, relative ones are resolved."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The project's Hydra plugins; the hydra_plugins namespace is shared with the launchers', which
# launch may import.
PLUGINS = "hydra_plugins.per_atari"
# package -> the packages it must not import; README.md ("How it is built") mirrors this table.
FORBIDDEN = {
    # How every component's settings are declared and read: every package may import it.
    "schema": {
        "agents",
        "replay",
        "envs",
        "artifacts",
        "training",
        "launch",
        "evaluation",
        "reporting",
        "cliffwalk",
        PLUGINS,
    },
    "agents": {"training", "launch", "evaluation", "reporting", "cliffwalk", "artifacts", PLUGINS},
    "replay": {"training", "launch", "evaluation", "reporting", "cliffwalk", "artifacts", PLUGINS},
    "envs": {"training", "launch", "evaluation", "reporting", "cliffwalk", "artifacts", PLUGINS},
    "artifacts": {"training", "launch", "evaluation", "reporting", "replay", PLUGINS},
    "evaluation": {"training", "launch", "replay", "reporting", PLUGINS},
    "reporting": {"training", "launch", "replay", PLUGINS},
    "cliffwalk": {"training", "launch", "evaluation", "reporting", PLUGINS},
    "training": {"launch", "reporting", "cliffwalk", PLUGINS},
    "launch": {"reporting", "cliffwalk", PLUGINS},
    # Hydra imports the plugins at the start of the project's runs (they are not installed):
    # they reach the project through launch alone, and only when a sweep uses them.
    "hydra_plugins": {
        "schema",
        "agents",
        "replay",
        "envs",
        "artifacts",
        "training",
        "evaluation",
        "reporting",
        "cliffwalk",
    },
}


def is_module(root: Path, name: str) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in the file at `path`; for
    `from m import n`, m.n where that is a module below `root`, else m."""
    package = path.relative_to(root).parent.parts
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) + 1 - node.level]) if node.level else []
            module = ".".join([*base, *filter(None, [node.module])])
            for alias in node.names:
                name = f"{module}.{alias.name}"
                found.append((node.lineno, name if is_module(root, name) else module))
    return found


def violations(root: Path, package: str) -> list[str]:
    """'file:line imports module (package must not import ...)', one per forbidden import."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path, root):
            if any(module == name or module.startswith(f"{name}.") for name in FORBIDDEN[package]):
                found.append(
                    f"{path.relative_to(root)}:{line} imports {module} ({package} must not "
                    f"import {', '.join(sorted(FORBIDDEN[package]))})"
                )
    return found


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules below `root` it imports (the top-level scripts and every package
    of FORBIDDEN). Importing a.b also runs a's __init__, which is not counted: a package's
    __init__ imports its own modules, not the other way round."""
    files = [path for package in FORBIDDEN for path in (root / package).rglob("*.py")]
    files += list(root.glob("*.py"))
    graph = {}
    for path in files:
        name = module_name(path, root)
        graph[name] = {
            module
            for _, module in imported_modules(path, root)
            if module != name and is_module(root, module)
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """Modules that import each other in a circle, the first one again at the end; [] if none."""
    done: set[str] = set()
    for start in sorted(graph):
        path, branches = [start], [iter(sorted(graph[start]))]
        while branches:
            module = next(branches[-1], None)
            if module is None:
                done.add(path.pop())
                branches.pop()
            elif module in path:
                return path[path.index(module) :] + [module]
            elif module not in done and module in graph:
                path.append(module)
                branches.append(iter(sorted(graph[module])))
    return []


def test_every_package_has_a_rule():
    """Every top-level folder of Python modules but the tests, benchmarks and scripts (which no
    package imports) is a package of the table."""
    folders = {
        folder.name
        for folder in ROOT.iterdir()
        if folder.is_dir() and not folder.name.startswith(".") and any(folder.rglob("*.py"))
    }
    assert folders - {"tests", "benchmarks", "scripts"} == set(FORBIDDEN)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_run_in_the_intended_direction(package):
    found = violations(ROOT, package)
    assert not found, "\n".join(found)


def test_no_modules_import_each_other():
    cycle = find_cycle(import_graph(ROOT))
    assert not cycle, " imports ".join(cycle)


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


def test_the_check_finds_a_cycle_through_type_only_and_submodule_imports(tmp_path):
    (tmp_path / "reporting").mkdir()
    (tmp_path / "reporting" / "__init__.py").write_text("")
    (tmp_path / "reporting" / "plots.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from reporting.report import Band\n"
    )
    (tmp_path / "reporting" / "report.py").write_text("from reporting import plots\n")
    (tmp_path / "reporting" / "markdown.py").write_text("import reporting.report\n")
    assert find_cycle(import_graph(tmp_path)) == [
        "reporting.report",
        "reporting.plots",
        "reporting.report",
    ]
    (tmp_path / "reporting" / "plots.py").write_text("import numpy\n")
    assert find_cycle(import_graph(tmp_path)) == []


def test_the_project_plugins_are_apart_from_the_shared_namespace(tmp_path):
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "launch.py").write_text(
        "from hydra_plugins.hydra_submitit_launcher import config\n"
        "from hydra_plugins.per_atari import settings\n"
    )
    assert [line.split(" (")[0] for line in violations(tmp_path, "training")] == [
        "training/launch.py:2 imports hydra_plugins.per_atari"
    ]
