"""Installing the project. It installs its dependencies and nothing of its own: in a fresh
virtual environment with its wheel installed after stand-ins of PyPI's `evaluate`, `schema` and
`envs`, those names are the stand-ins', and someone else's Hydra application starts without
importing the project or torch; the project runs from its checkout beside them.

The recipe of docs/gpu.md for installing on a machine without network, in the parts a machine
without network can check: the project builds its wheel offline, pip finds it in a local folder
with --no-index --find-links, and scripts/offline_requirements.py lists every requirement of that
wheel and of all its extras except torch (and the project's own extras), so the folder the
recipe fills on a machine with network holds all an offline install needs. The download itself
needs the network and is not tested here."""

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from offline_requirements import offline_requirements  # noqa: E402

from tests.test_import_rules import FORBIDDEN  # noqa: E402

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def pip(*arguments: str) -> subprocess.CompletedProcess:
    environment = {"PATH": "/usr/bin:/bin", **OFFLINE}
    return subprocess.run(
        [sys.executable, "-m", "pip", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The project's wheel, built without network from a copy of what it is made of."""
    source, wheels = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheels")
    setuptools = PYPROJECT["tool"]["setuptools"]
    for package in setuptools["packages"]:
        path = package.replace(".", "/")
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / path, source / path, ignore=ignore, dirs_exist_ok=True)
    for name in ("pyproject.toml", "README.md", *(f"{m}.py" for m in setuptools["py-modules"])):
        shutil.copy(ROOT / name, source / name)
    built = pip(
        "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels), str(source)
    )
    assert built.returncode == 0, built.stderr
    (path,) = wheels.glob("per_atari-*.whl")
    return path


def test_pip_installs_the_project_from_a_local_folder_without_an_index(wheel, tmp_path):
    report = tmp_path / "report.json"
    resolved = pip(
        "install", "--dry-run", "--ignore-installed", "--no-deps", "--find-links",
        str(wheel.parent), "--report", str(report), "per-atari[dev]",
    )  # fmt: skip
    assert resolved.returncode == 0, resolved.stderr
    (install,) = json.loads(report.read_text())["install"]
    assert install["metadata"]["name"] == "per-atari"
    assert install["download_info"]["url"] == wheel.as_uri()


def test_the_offline_requirements_are_the_wheels_requirements_but_torch(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    required = [
        Requirement(line.split(":", 1)[1]) for line in lines if line.startswith("Requires-Dist:")
    ]
    in_wheel = {(r.name, r.specifier) for r in required if r.name not in ("torch", "per-atari")}
    listed = {(r.name, r.specifier) for r in map(Requirement, offline_requirements(PYPROJECT))}
    assert listed == in_wheel
    assert "torch" in {r.name for r in required}  # what the machine brings itself


# Names of the project's folders that PyPI's packages have too (Hugging Face's `evaluate`).
STAND_INS = ("evaluate", "schema", "envs")
# Someone else's Hydra application: it prints the modules it imported of those named WATCHED.
HYDRA_APP = """\
import os, sys
import hydra
@hydra.main(version_base=None, config_path=None)
def main(cfg):
    print(sorted(m for m in sys.modules if m.split(".")[0] in os.environ["WATCHED"].split()))
main()
"""
# torch, and every top-level module of the project that Hydra does not import itself.
WATCHED = ["torch", "train", *(name for name in FORBIDDEN if name != "hydra_plugins")]


def python_in(environment: Path, *arguments: str, cwd: Path, **variables: str):
    return subprocess.run(
        [str(environment), *arguments],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **variables},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def environment(wheel, tmp_path_factory) -> Path:
    """The python of a fresh virtual environment with the stand-ins' wheel installed, then the
    project's, as a user who has PyPI's packages installs the project. It borrows the
    project's dependencies (hydra, torch) from the environment running the tests, after its
    own packages, rather than installing them again."""
    root = tmp_path_factory.mktemp("environment")
    source = root / "stand_ins"
    for name in STAND_INS:
        (source / name).mkdir(parents=True)
        (source / name / "__init__.py").write_text(f"STAND_IN = {name!r}\n")
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "stand-ins"\nversion = "1.0"\n'
        f"[tool.setuptools]\npackages = {list(STAND_INS)!r}\n"
    )
    built = pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(root), str(source))
    assert built.returncode == 0, built.stderr
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(python_in(python, "-c", purelib, cwd=root).stdout.strip())
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for installed in (*root.glob("stand_ins-*.whl"), wheel):
        done = pip(
            "--python", str(python), "install", "--no-deps", "--ignore-installed", str(installed)
        )
        assert done.returncode == 0, done.stderr
    return python


def test_the_wheel_installs_no_module(wheel):
    with zipfile.ZipFile(wheel) as archive:
        installed = {name.split("/")[0] for name in archive.namelist()}
    assert [name for name in installed if not name.endswith(".dist-info")] == []


def test_pypis_names_stay_theirs(environment, tmp_path):
    names = ", ".join(STAND_INS)
    stand_ins = ", ".join(f"{name}.STAND_IN" for name in STAND_INS)
    found = python_in(environment, "-c", f"import {names}; print({stand_ins})", cwd=tmp_path)
    assert found.stdout.split() == list(STAND_INS), found.stderr


def test_another_hydra_app_starts_without_importing_the_project_or_torch(environment, tmp_path):
    (tmp_path / "app.py").write_text(HYDRA_APP)
    run_dir = f"hydra.run.dir={tmp_path / 'out'}"
    started = python_in(environment, "app.py", run_dir, cwd=tmp_path, WATCHED=" ".join(WATCHED))
    assert started.returncode == 0, started.stderr
    assert started.stdout == "[]\n"


def test_the_project_runs_from_its_checkout_beside_them(environment, tmp_path):
    """train.py, started from another directory, imports its own `envs` and `schema`, and
    stores the defaults its configs build on itself."""
    shown = python_in(
        environment, str(ROOT / "train.py"), "--cfg", "job", "experiment=demo", cwd=tmp_path
    )
    assert shown.returncode == 0, shown.stderr
    assert "priority_signal: td_error" in shown.stdout
