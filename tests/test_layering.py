"""The layering rules of docs/architecture.md: the library ``rudder`` imports none of the outer
packages, each outer package imports only ``rudder`` (never another outer package), and each
part of ``rudder`` imports only parts of lower layers (the table 'The layers of rudder')."""

import ast
import re
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
    (rudder.evaluation.selection, rudder.devices)."""
    imported = {}
    for package in ("rudder", *OUTER, "tests", "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module == "rudder.training.trainer":
                    imported |= {alias.name: str(path.relative_to(ROOT)) for alias in node.names}
    assert set(imported) == {"Trainer"}, imported


def test_at_most_eighteen_modules_sit_directly_under_rudder():
    """The ground and its helpers, the commands, supervision and translation; the rest is
    grouped by role."""
    modules = sorted(p.name for p in (ROOT / "rudder").glob("*.py"))
    assert len(modules) <= 18, modules


def test_every_library_folder_is_a_regular_package():
    """A folder of modules without ``__init__.py`` would import as a namespace package from a
    checkout and be left out of the wheel."""
    folders = {p.parent for p in (ROOT / "rudder").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders
                  if not (f / "__init__.py").exists()) == []


DOC = ROOT / "docs" / "architecture.md"
# Imports under ``if TYPE_CHECKING:`` that go to the same or a higher layer: annotations only.
TYPE_CHECKING_EXCEPTIONS = {("rudder/text/encoders.py", "data")}


def layers(doc: str) -> dict[str, int]:
    """Part -> layer number, from the table of docs/architecture.md's 'The layers of rudder'."""
    section = doc[doc.index("**The layers of `rudder`.**"):]
    section = section[:section.index("\n\n", section.index("| layer |"))]
    found = {}
    for number, parts in re.findall(r"^\| (\d+) \| ([^|]+) \|", section, re.MULTILINE):
        for part in re.findall(r"`(\w+)`", parts):
            assert part not in found, f"{part} is in two layers"
            found[part] = int(number)
    return found


def _part(module: str) -> str | None:
    """The part of ``rudder`` a dotted module belongs to (``rudder.data.loader`` -> ``data``);
    None for ``rudder`` itself."""
    names = module.split(".")
    return names[1] if names[0] == "rudder" and len(names) > 1 else None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                inside |= {id(child) for child in ast.walk(statement)}
    return inside


def part_imports(path: Path, root: Path = ROOT) -> list[tuple[str, bool]]:
    """(part of rudder imported, under TYPE_CHECKING) for every import in a file of rudder,
    including imports inside functions and relative imports."""
    package = list(path.relative_to(root).with_suffix("").parts)[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            # ``from rudder import x`` imports the part x; ``from rudder.x import y`` part x
            modules = [f"{base}.{alias.name}" for alias in node.names] if base == "rudder" \
                else [base]
        found += [(part, id(node) in typing_only) for part in map(_part, modules) if part]
    return found


def layer_violations(root: Path = ROOT, doc: str | None = None) -> list[str]:
    order = layers(DOC.read_text(encoding="utf-8") if doc is None else doc)
    problems = []
    for path in sorted((root / "rudder").rglob("*.py")):
        relative = path.relative_to(root)
        own = _part(".".join(relative.with_suffix("").parts))
        if own in (None, "__init__"):
            continue  # rudder/__init__.py: the public API, imported lazily
        if own not in order:
            problems.append(f"{relative}: part {own!r} is in no layer of docs/architecture.md")
            continue
        for part, typing_only in part_imports(path, root):
            if part == own:
                continue
            if part not in order:
                problems.append(f"{relative} imports {part!r}, which is in no layer")
            elif order[part] >= order[own] and not (
                    typing_only and (relative.as_posix(), part) in TYPE_CHECKING_EXCEPTIONS):
                problems.append(f"{relative} (layer {order[own]}, {own}) imports {part} "
                                f"(layer {order[part]})")
    return sorted(set(problems))


def test_every_part_of_rudder_imports_only_lower_layers():
    assert layer_violations() == []


def test_the_layer_table_names_every_part_and_nothing_else():
    parts = {p.stem if p.is_file() else p.name for p in (ROOT / "rudder").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    assert set(layers(DOC.read_text(encoding="utf-8"))) == parts


def test_every_type_checking_exception_is_still_needed():
    used = set()
    for path in sorted((ROOT / "rudder").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        used |= {(relative, part) for part, typing_only in part_imports(path) if typing_only}
    assert TYPE_CHECKING_EXCEPTIONS <= used


LOW_HIGH_DOC = """**The layers of `rudder`.**

| layer | parts | what |
|---|---|---|
| 2 | `hub` | |
| 1 | `errors` | |

"""


@pytest.mark.parametrize(("code", "expected"), [
    ("from rudder.hub import x\n", ["rudder/errors.py (layer 1, errors) imports hub (layer 2)"]),
    ("def f():\n    import rudder.hub.y\n",
     ["rudder/errors.py (layer 1, errors) imports hub (layer 2)"]),
    ("from rudder import hub\n", ["rudder/errors.py (layer 1, errors) imports hub (layer 2)"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rudder.hub import x\n",
     ["rudder/errors.py (layer 1, errors) imports hub (layer 2)"]),
    ("from rudder.other import x\n", ["rudder/errors.py imports 'other', which is in no layer"]),
    ("import os\n", []),
])
def test_the_layer_check_sees_upward_imports(tmp_path, code, expected):
    """A two-layer library: ``errors`` (layer 1) below the package ``hub`` (layer 2)."""
    (tmp_path / "rudder" / "hub").mkdir(parents=True)
    (tmp_path / "rudder" / "__init__.py").write_text("")
    (tmp_path / "rudder" / "hub" / "__init__.py").write_text("from .. import errors\n")
    (tmp_path / "rudder" / "errors.py").write_text(code)
    assert layer_violations(tmp_path, LOW_HIGH_DOC) == expected
