"""The import graph of a package, for the no-cycle tests: an edge for every ``import`` and
``from ... import`` between its modules, at module level or inside functions."""

from __future__ import annotations

import ast
from pathlib import Path


def package_modules(folder: Path, name: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package folder."""
    modules = {}
    for path in sorted(Path(folder).rglob("*.py")):
        parts = [name, *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(node: ast.AST, module: str, is_package: bool, modules: dict) -> set[str]:
    """The package's modules one import statement loads. ``from X import a`` loads ``X.a``
    when that is a module, else ``X`` itself (a name its ``__init__`` defines); the parent
    packages every submodule import runs first are left out (Python runs a package's
    ``__init__`` once, before its submodules)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & modules.keys()
    if not isinstance(node, ast.ImportFrom):
        return set()
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module
    found = set()
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        found.add(submodule if submodule in modules else source)
    return found & modules.keys()


def import_graph(folder: Path, name: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its file."""
    modules = package_modules(folder, name)
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        graph[module] = set().union(
            *(_imported(node, module, is_package, modules) for node in ast.walk(tree))
        ) - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm,
    iterative), each sorted; a module importing itself is no cycle here."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
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
