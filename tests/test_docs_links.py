"""The project's docs stand alone: no file cites the original design document outside the
repository, every ``docs/<name>.md`` path a file cites exists, and every relative link of a
Markdown file points at a file of the checkout (and, with ``#anchor``, at one of its
headings)."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC_PATH = re.compile(r"\bdocs/[A-Za-z0-9_.-]+\.md\b")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = "DESIGN" + ".md"  # spelled apart so this file does not cite it


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return [ROOT / n for n in names
            if n.endswith((".py", ".md", ".yaml", ".toml", ".sh", ".txt", ".cfg"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    headings = re.findall(r"^#+\s+(.*)$", markdown.read_text(encoding="utf-8"), re.MULTILINE)
    return {slug(h) for h in headings}


def test_slug_follows_github():
    assert slug("Public API (stable; tests and tools rely on it)") == (
        "public-api-stable-tests-and-tools-rely-on-it")
    assert slug("GPU and several processes") == "gpu-and-several-processes"


# A repository file named by its path in a doc, docstring or comment (CHANGELOG keeps history).
SOURCE_PATH = re.compile(
    r"(?<![\w./-])((?:rudder|app|heuristics|datasets_scripts|experiments|benchmarks|scripts|"
    r"tests|docs|examples)/[\w./-]*\w\.(?:py|md|yaml|yml|sh|tsv))\b")


def test_every_cited_source_path_exists():
    """Paths such as ``rudder/runs/layout.py`` or ``tests/config/test_config.py`` in the docs
    and the code follow the files when they move."""
    missing = sorted({f"{p.relative_to(ROOT)}: {m}" for p in tracked_text_files()
                      if p.name != "CHANGELOG.md"
                      for m in SOURCE_PATH.findall(p.read_text(encoding="utf-8", errors="replace"))
                      if not (ROOT / m).is_file()})
    assert missing == []


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_no_file_cites_the_design_document_outside_the_repository():
    citing = [str(p.relative_to(ROOT)) for p in tracked_text_files()
              if OUTSIDE in p.read_text(encoding="utf-8", errors="replace")]
    assert citing == [], f"cite docs/architecture.md instead: {citing}"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_every_cited_doc_path_exists():
    missing = sorted({f"{p.relative_to(ROOT)}: {m}" for p in tracked_text_files()
                      for m in DOC_PATH.findall(p.read_text(encoding="utf-8", errors="replace"))
                      if not (ROOT / m).is_file()})
    assert missing == []


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_every_relative_markdown_link_resolves():
    broken = []
    for page in (p for p in tracked_text_files() if p.suffix == ".md"):
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in MD_LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_readme_is_a_short_tour():
    """The README stays the user's tour: measured figures live in docs/benchmarks.md, result
    discussions in experiments/README.md, history in CHANGELOG.md."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
