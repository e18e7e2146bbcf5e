"""The library's old flat module names import as the moved modules, with a warning."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rudder

ROOT = Path(__file__).resolve().parents[1]


def test_at_most_sixteen_modules_sit_directly_under_rudder():
    modules = sorted(p.name for p in (ROOT / "rudder").glob("*.py"))
    assert len(modules) <= 16, modules


@pytest.mark.parametrize("old", sorted(rudder.MOVED_MODULES))
def test_every_moved_name_points_at_a_module_that_exists(old):
    new = rudder.MOVED_MODULES[old]
    assert importlib.util.find_spec(new) is not None, new
    assert not (ROOT / (old.replace(".", "/") + ".py")).exists(), "the old file is back"


def test_an_old_name_is_the_same_module_object(recwarn):
    from rudder import metrics
    from rudder.evaluation import metrics as moved

    assert metrics is moved and sys.modules["rudder.metrics"] is moved
    assert moved.__spec__.name == "rudder.evaluation.metrics"


def test_old_names_warn_at_the_line_that_imports_them_under_default_filters(tmp_path):
    """Python shows a DeprecationWarning by default only when it is attributed to
    ``__main__``: the warning must point past the import machinery, at the script."""
    script = tmp_path / "old_names.py"
    script.write_text("import rudder.metrics\n"
                      "from rudder import run_layout\n"
                      "from rudder.hub import hub_offline\n"
                      "from rudder.runs import load_run\n"
                      "import importlib\n"
                      "importlib.import_module('rudder.trainer')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS",)}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "DeprecationWarning" in line]
    moves = [(1, "rudder.metrics", "rudder.evaluation.metrics"),
             (2, "rudder.run_layout", "rudder.runs.layout"),
             (3, "rudder.hub.hub_offline", "rudder.hub.offline.hub_offline"),
             (4, "rudder.runs.load_run", "rudder.runs.folders.load_run"),
             (6, "rudder.trainer", "rudder.training.trainer")]
    assert warned == [f"{script}:{line}: DeprecationWarning: {old} is now {new}; import it "
                      "from there" for line, old, new in moves]


@pytest.mark.parametrize(("shim", "module"), [("rudder.evaluate", "rudder.evaluation.evaluate"),
                                             ("rudder.publish", "rudder.hub.publish")])
def test_a_command_shim_forwards_every_public_name(shim, module):
    shim, module = importlib.import_module(shim), importlib.import_module(module)
    public = {name for name in vars(module) if not name.startswith("_")}
    assert all(getattr(shim, name) is getattr(module, name) for name in public)


def test_a_name_that_never_existed_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rudder.no_such_module")


@pytest.mark.parametrize(("package", "module", "name"), [
    ("rudder.runs", "rudder.runs.folders", "load_run"),
    ("rudder.hub", "rudder.hub.offline", "hub_offline"),
])
def test_a_former_module_s_names_import_from_its_package(package, module, name, recwarn):
    assert getattr(importlib.import_module(package), name) is getattr(
        importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        getattr(importlib.import_module(package), "nope")  # noqa: B009 -- the lazy lookup


def test_every_library_folder_is_a_regular_package():
    """A folder of modules without ``__init__.py`` would import as a namespace package from a
    checkout and be left out of the wheel."""
    folders = {p.parent for p in (ROOT / "rudder").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders
                  if not (f / "__init__.py").exists()) == []
