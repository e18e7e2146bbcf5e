"""No import cycle among the modules of rudder and the four outer packages.

A static check: every ``import`` / ``from ... import`` of a module's top level (including
those under ``if TYPE_CHECKING:``, ``try:`` and other blocks) is an edge to the module it
names (``from a import b`` names ``a.b`` when that is a module, else ``a``); importing
``a.b.c`` from outside package ``a.b`` also runs ``a/__init__`` and ``a/b/__init__``, so it
adds edges to those. A cycle is a strongly connected component of more than one module.
Imports inside functions (run later, when every module is loaded) are a second, weaker
check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rudder", "heuristics", "experiments", "app", "datasets_scripts")


def module_files(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``packages`` under ``root``."""
    modules = {}
    for package in packages:
        assert (root / package).is_dir(), f"{package}/ moved: update PACKAGES of this test"
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _top_level(body: list[ast.stmt]):
    """Import statements run when the module is loaded: the body's, and those of its
    ``if`` / ``try`` / ``with`` blocks (not of function or class bodies)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:
                yield from _top_level(block)


def imported(module: str, path: Path, modules: dict, deferred: bool = False) -> set[str]:
    """The modules of ``modules`` that ``module`` imports at load time (``deferred``: also
    inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    nodes = ast.walk(tree) if deferred else _top_level(tree.body)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                name = f"{base}.{alias.name}"
                targets.add(name if name in modules else base)
    edges = set()
    for target in targets:
        parts = target.split(".")
        for end in range(1, len(parts) + 1):
            name = ".".join(parts[:end])
            inside = (module + ".").startswith(name + ".")  # its own package: already loading
            if name in modules and name != module and (end == len(parts) or not inside):
                edges.add(name)
    return edges


def import_graph(root: Path = ROOT, packages=PACKAGES, deferred: bool = False) -> dict:
    modules = module_files(root, packages)
    return {name: imported(name, path, modules, deferred) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start, targets in graph.items():
        if start in index:
            continue
        work = [(start, iter(sorted(targets)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def cycles_in(package: str, deferred: bool = False) -> list[list[str]]:
    return [c for c in cycles(import_graph(deferred=deferred))
            if any(m == package or m.startswith(package + ".") for m in c)]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_at_load_time(package):
    assert cycles_in(package) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_through_imports_inside_functions(package):
    """Imports inside functions break no load, but a cycle through them still ties the
    modules together: a shared piece lives in the module that owns it, or in its own."""
    assert cycles_in(package, deferred=True) == []


def _package(root: Path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return import_graph(root, ("pkg",))


def test_the_check_finds_a_cycle_through_type_checking_and_relative_imports(tmp_path):
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import B\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n",
        "pkg/c.py": "from . import a\n",
        "pkg/d.py": "import pkg.a\n",
    })
    assert graph["pkg.c"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_imports_inside_functions_count_only_as_deferred(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/a.py": "import pkg.b\n",
             "pkg/b.py": "def f():\n    import pkg.a\n"}
    assert cycles(_package(tmp_path, files)) == []
    assert cycles(import_graph(tmp_path, ("pkg",), deferred=True)) == [["pkg.a", "pkg.b"]]


def test_importing_a_submodule_from_outside_runs_its_package(tmp_path):
    """``pkg.sub.x`` imported from outside ``pkg.sub`` loads ``pkg/sub/__init__`` first,
    which here imports the importer back: a cycle; a sibling importing it is not."""
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "from pkg.sub.x import X\nfrom pkg.user import U\n",
        "pkg/sub/x.py": "from pkg.sub.y import Y\n",
        "pkg/sub/y.py": "",
        "pkg/user.py": "from pkg.sub.y import Y\n",
    })
    assert graph["pkg.sub.x"] == {"pkg.sub.y"}
    assert graph["pkg.user"] == {"pkg.sub", "pkg.sub.y"}
    assert cycles(graph) == [["pkg.sub", "pkg.user"]]
