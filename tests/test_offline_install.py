"""The recipe of docs/gpu.md for installing on a machine without network, in the parts a machine
without network can check: the project builds its wheel offline, pip finds it in a local folder
with --no-index --find-links, and scripts/offline_requirements.py lists every requirement of that
wheel and of all its extras except torch (and the project's own extras), so the folder the
recipe fills on a machine with network holds all an offline install needs. The download itself
needs the network and is not tested here."""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from offline_requirements import offline_requirements  # noqa: E402

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
