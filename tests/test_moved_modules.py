"""The library's old flat module names import as the moved modules, with a warning."""

import importlib
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


def test_an_old_name_is_the_same_module_object_and_warns():
    code = ("import warnings, sys\n"
            "warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    from rudder import metrics\n"
            "import rudder.evaluation.metrics as moved\n"
            "assert metrics is moved and sys.modules['rudder.metrics'] is moved\n"
            "assert moved.__spec__.name == 'rudder.evaluation.metrics'\n"
            "assert [str(w.message) for w in caught if w.category is DeprecationWarning] == "
            "['rudder.metrics is now rudder.evaluation.metrics; import it from there']\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


def test_a_name_that_never_existed_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rudder.no_such_module")


def test_run_folder_names_still_import_from_the_package():
    from rudder.runs import folders, load_run

    assert load_run is folders.load_run
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        getattr(importlib.import_module("rudder.runs"), "nope")  # noqa: B009 -- the lazy lookup


def test_every_library_folder_is_a_regular_package():
    """A folder of modules without ``__init__.py`` would import as a namespace package from a
    checkout and be left out of the wheel."""
    folders = {p.parent for p in (ROOT / "rudder").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders
                  if not (f / "__init__.py").exists()) == []
