"""indic-nlp-library is a core dependency for its normaliser and tokeniser only: its declared
requirements for building its own documentation (sphinx, sphinx-rtd-theme, sphinx-argparse,
docutils) and morfessor are installed with it but never imported by rudder."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNUSED = ("sphinx", "sphinx_rtd_theme", "sphinxarg", "docutils", "morfessor")


def test_indic_text_processing_imports_no_documentation_tooling():
    code = (
        "import sys\n"
        "from rudder.text import tokenize\n"
        "from heuristics.nouns_verbs import normalise\n"
        "for lang, text in (('mr', 'कागद कापा.'), ('hi', 'कागज़ को काटिए।'),"
        " ('ta', 'காகிதம் வெட்டவும்'), ('te', 'కాగితం కత్తిరించండి')):\n"
        "    assert tokenize(text, lang), lang\n"
        "    normalise(text.split()[0], lang)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {UNUSED!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
