"""The layering rule of docs/architecture.md: the library ``rudder`` imports none of the outer
packages, and each outer package imports only ``rudder`` (never another outer package)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUTER = ("heuristics", "app", "datasets_scripts", "experiments")


def imported_packages(path: Path) -> set[str]:
    """Top-level names of every absolute import in a file, including imports inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def violations(package: str) -> list[str]:
    forbidden = set(OUTER) - {package}
    return [f"{path.relative_to(ROOT)} imports {sorted(imported_packages(path) & forbidden)}"
            for path in sorted((ROOT / package).rglob("*.py"))
            if imported_packages(path) & forbidden]


@pytest.mark.parametrize("package", ["rudder", *OUTER])
def test_package_imports_follow_the_layers(package):
    assert violations(package) == []


def test_the_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from app.ui import build\n    import heuristics.label\n")
    assert imported_packages(module) >= {"app", "heuristics"}


def imported_modules(path: Path) -> set[str]:
    """Dotted names of every absolute import in a file (``from a.b import c`` gives ``a.b``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_data_side_does_not_import_the_supervision():
    """Class sets belong to the data (rudder.data.classes); supervision builds on them."""
    supervision = {"rudder.supervision", "rudder.training.batch_supervision"}
    data_side = sorted((ROOT / "rudder" / "data").rglob("*.py"))
    offenders = [str(p.relative_to(ROOT)) for p in data_side if supervision & imported_modules(p)]
    assert offenders == []


def test_only_the_trainer_is_imported_from_the_trainer():
    """Helpers that evaluation or experiments share live in modules of their own
    (rudder.evaluation.selection, rudder.training.devices)."""
    imported = {}
    for package in ("rudder", *OUTER, "tests", "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module == "rudder.training.trainer":
                    imported |= {alias.name: str(path.relative_to(ROOT)) for alias in node.names}
    assert set(imported) == {"Trainer"}, imported


def test_at_most_sixteen_modules_sit_directly_under_rudder():
    modules = sorted(p.name for p in (ROOT / "rudder").glob("*.py"))
    assert len(modules) <= 16, modules


def test_every_library_folder_is_a_regular_package():
    """A folder of modules without ``__init__.py`` would import as a namespace package from a
    checkout and be left out of the wheel."""
    folders = {p.parent for p in (ROOT / "rudder").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders
                  if not (f / "__init__.py").exists()) == []
