"""One owner for the small infrastructure: the cache folder is ``rudder.paths.cache_dir``
alone, and temporary files, renames and staging go through ``rudder.atomic``. A new copy
anywhere in the library or the outer packages fails here, with the place to fix."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rudder", "app", "heuristics", "datasets_scripts", "experiments")
CACHE_OWNER = "rudder/paths.py"
ATOMIC_OWNER = "rudder/atomic.py"
RENAMES = {"os.replace", "os.rename", "shutil.move"}
# Places that rename or use tempfile for another job than rudder.atomic's, and why.
OTHER_JOBS = {
    ("rudder/data/update_journal.py", "os.replace"): "applies a committed multi-file update "
    "(all splits or none, redone by the next reader after a kill), under held_termination",
    ("rudder/data/sample.py", "os.rename"): "publishes the sample once: never over a copy "
    "another process finished first",
    ("app/annotate_handlers.py", "tempfile.TemporaryDirectory"): "the app's folder Gradio "
    "serves the export files from, removed with the app; the files in it are written by "
    "rudder.atomic",
    ("rudder/hub/publish.py", "tempfile.mkdtemp"): "the scratch folder of the files to upload, "
    "outside any dataset or run, removed when the upload ends; --stage copies go through "
    "rudder.atomic",
}


def _name(node) -> str:
    """``a.b.c`` for a chain of attributes on a name, else ''."""
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return node.id if isinstance(node, ast.Name) else ""


def findings(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every cache-folder literal, rename, Path.rename and tempfile use."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in ("RUDDER_CACHE", ".cache") or node.value.startswith("~/.cache"):
                found.append((node.lineno, f"cache:{node.value}"))
        elif isinstance(node, ast.Call):
            name = _name(node.func)
            if name in RENAMES or name.startswith("tempfile."):
                found.append((node.lineno, name))
            elif (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "rename"
                and len(node.args) == 1
                and not node.keywords
            ):
                found.append((node.lineno, "Path.rename"))
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil", "tempfile"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if name in RENAMES or node.module == "tempfile":
                    found.append((node.lineno, name))
    return found


def copies() -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for line, what in findings(path):
                owner = CACHE_OWNER if what.startswith("cache:") else ATOMIC_OWNER
                if where != owner and (where, what) not in OTHER_JOBS:
                    out.append(f"{where}:{line}: {what} (use {owner})")
    return out


def test_no_copy_of_the_cache_folder_or_the_atomic_writes():
    assert copies() == []


def test_the_check_sees_each_kind_of_copy(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import os, shutil, tempfile\nfrom pathlib import Path\n"
        "from os import replace\n"
        "def f(p):\n"
        "    root = os.environ.get('RUDDER_CACHE') or Path.home() / '.cache'\n"
        "    os.replace(p, p)\n    os.rename(p, p)\n    shutil.move(p, p)\n"
        "    Path(p).rename(p)\n    tempfile.mkdtemp()\n"
        "    return '$RUDDER_CACHE/x is mentioned in help text', df.rename(columns={})\n"
    )
    assert sorted(what for _, what in findings(module)) == [
        "Path.rename",
        "cache:.cache",
        "cache:RUDDER_CACHE",
        "os.rename",
        "os.replace",
        "os.replace",
        "shutil.move",
        "tempfile.mkdtemp",
    ]


def test_the_other_jobs_are_still_there():
    """An entry of OTHER_JOBS whose place no longer does it is removed, not kept stale."""
    for where, what in OTHER_JOBS:
        assert what in {w for _, w in findings(ROOT / where)}, (where, what)
