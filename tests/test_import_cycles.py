"""No import cycles inside a package: the graph of every ``import`` between its modules,
including imports inside functions, is acyclic (docs/architecture.md's layering within a
package). A shared piece two modules need lives in the module that owns it, or in a small
module of its own."""

import importlib.util
from pathlib import Path

import pytest

from .import_graph import cycles, import_graph

PACKAGES = ("heuristics", "experiments", "app", "datasets_scripts")


def package_folder(name: str) -> Path:
    return Path(importlib.util.find_spec(name).submodule_search_locations[0])


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_has_no_import_cycle(package):
    graph = import_graph(package_folder(package), package)
    assert len(graph) > 1
    assert cycles(graph) == []


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    folder = _write(tmp_path / "pkg", {
        "__init__.py": "",
        "a.py": "from .b import f\n",
        "b.py": "def f():\n    from .c import g\n    return g\n",
        "c.py": "import os\n\n\ndef g():\n    import pkg.a\n",
        "d.py": "from pkg import c\n",
    })
    graph = import_graph(folder, "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"},
                     "pkg.d": {"pkg.c"}}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_relative_imports_resolve_in_subpackages_and_names_of_an_init(tmp_path):
    folder = _write(tmp_path / "pkg", {
        "__init__.py": "from .sub import thing\n",
        "sub/__init__.py": "from .. import top\nthing = 1\n",
        "top.py": "from pkg import VERSION\n",
    })
    graph = import_graph(folder, "pkg")
    assert graph == {"pkg": {"pkg.sub"}, "pkg.sub": {"pkg.top"}, "pkg.top": {"pkg"}}
    assert cycles(graph) == [["pkg", "pkg.sub", "pkg.top"]]


def test_the_graph_sees_the_cycles_this_check_was_written_for(tmp_path):
    """The heuristics cycle as it was (nouns_verbs imported lexicon_tagger's ``inflects``
    inside a function), rebuilt in a scratch package."""
    folder = _write(tmp_path / "h", {
        "__init__.py": "",
        "nouns_verbs.py": "class TaggedWord: ...\n\ndef light_stem():\n"
                          "    from .lexicon_tagger import inflects\n",
        "taggers.py": "from .nouns_verbs import TaggedWord\n",
        "lexicon_tagger.py": "from .nouns_verbs import TaggedWord\n"
                             "from .taggers import tokenize_all\n",
    })
    assert cycles(import_graph(folder, "h")) == [["h.lexicon_tagger", "h.nouns_verbs",
                                                   "h.taggers"]]
