"""Packaging: the wheel installs only the ``rudder`` namespace (the outer folders become
``rudder.app``, ``rudder.heuristics``, ...) and every command runs from the installed copy."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
OUTER = ("app", "experiments", "heuristics", "datasets_scripts")


def installed_name(package_dir: Path) -> str:
    """The dotted name a source folder gets in the wheel."""
    parts = package_dir.relative_to(ROOT).parts
    return ".".join(parts if parts[0] == "rudder" else ("rudder", *parts))


def test_every_source_package_is_listed_for_the_wheel():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = [init.parent for top in ("rudder", *OUTER) for init in (ROOT / top).rglob("__init__.py")]
    assert sorted(setuptools["packages"]) == sorted(installed_name(folder) for folder in folders)
    assert {setuptools["package-dir"][f"rudder.{top}"] for top in OUTER} == set(OUTER)


def test_outer_packages_import_themselves_relatively():
    """An absolute ``from app.x import`` would break once installed as ``rudder.app``."""
    offenders = [f"{path.relative_to(ROOT)}: {line.strip()}"
                 for top in OUTER for path in (ROOT / top).rglob("*.py")
                 for line in path.read_text(encoding="utf-8").splitlines()
                 if line.lstrip().startswith((f"from {top}.", f"from {top} import", f"import {top}"))]
    assert offenders == []


@pytest.mark.slow
def test_the_wheel_has_no_generic_top_level_names_and_its_commands_run(tmp_path):
    source = tmp_path / "source"  # a copy, so the build leaves no build/ folder in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    for top in ("rudder", *OUTER):
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    str(source), "-w", str(tmp_path / "wheel")], check=True, capture_output=True)
    wheel = next((tmp_path / "wheel").glob("rudder-*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"rudder"}
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    for module in ("rudder.train", "rudder.evaluate", "rudder.app", "rudder.heuristics",
                   "rudder.datasets_scripts", "rudder.experiments.run", "rudder.experiments.tune"):
        done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{module}: {done.stderr[-500:]}"
    builders = subprocess.run([sys.executable, "-m", "rudder.datasets_scripts", "build", "--help"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert "msrvtt" in builders.stdout
    assert (target / "bin" / "rudder-train").is_file()
    imported = subprocess.run([sys.executable, "-c", "import rudder.app, rudder.heuristics; print(rudder.app.__file__)"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert imported.stdout.startswith(str(target))
