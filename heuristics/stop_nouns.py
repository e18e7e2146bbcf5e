"""Generic subject nouns that do not make two captions partial.

Charades-STA captions name their actor ("person opens the door", "a man sits"): with
alpha_n = 0.5 the shared word *person* alone made most caption pairs of a split partial.
``label`` leaves the nouns below out of ``noun_classes`` (the ``nouns`` column keeps every
lemma), so they count neither for the partial heuristic nor for relevance. A compound
noun is stop-listed by its head (``person:young``). The list is per language; a TSV
``lang<TAB>lemma`` (header ``lang<TAB>lemma``) replaces it (``label --stop-nouns FILE``),
``--no-stop-nouns`` empties it.
"""

from __future__ import annotations

from pathlib import Path

from rudder.languages import check_language

from .nouns_verbs import normalise
from .text_files import read_text

# The actors of caption corpora: person and its everyday synonyms, people, and the
# gendered and age words (man, woman, boy, girl, ...) and their equivalents.
STOP_NOUNS = {
    "en": "person people man men woman women someone somebody guy lady boy girl child kid "
    "human individual",
    "hi": "व्यक्ति आदमी औरत महिला पुरुष स्त्री लड़का लड़की बच्चा इंसान",
    "mr": "व्यक्ती माणूस माणसं बाई स्त्री पुरुष मुलगा मुलगी मूल",
    "ta": "நபர் மனிதன் மனிதர் ஆண் பெண் சிறுவன் சிறுமி குழந்தை ஒருவர்",
    "te": "వ్యక్తి మనిషి పురుషుడు స్త్రీ మహిళ అబ్బాయి అమ్మాయి పిల్లవాడు",
}


class StopNounError(ValueError):
    """A malformed stop-noun file; the message names the file and line."""


def default_stop_nouns() -> dict[str, frozenset]:
    return {
        lang: frozenset(normalise(w, lang) for w in words.split())
        for lang, words in STOP_NOUNS.items()
    }


def read_stop_nouns(path) -> dict[str, frozenset]:
    """Read a ``lang<TAB>lemma`` TSV (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise StopNounError(f"{path}: no such stop-noun file")
    out: dict[str, set] = {}
    lines = read_text(path, StopNounError).splitlines()
    if not lines or lines[0].split("\t") != ["lang", "lemma"]:
        raise StopNounError(f"{path}:1: expected the header 'lang<TAB>lemma'")
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        cells = [c.strip() for c in text.split("\t")]
        if len(cells) != 2 or not cells[1]:
            raise StopNounError(f"{path}:{number}: expected 'lang<TAB>lemma', got {text!r}")
        try:
            check_language(cells[0])
        except ValueError as error:
            raise StopNounError(f"{path}:{number}: {error}") from None
        out.setdefault(cells[0], set()).add(normalise(cells[1], cells[0]))
    return {lang: frozenset(words) for lang, words in out.items()}


def load_stop_nouns(path=None, enabled: bool = True) -> dict[str, frozenset]:
    """The stop-list ``label`` uses: none, the file at ``path``, or the default."""
    if not enabled:
        return {}
    return read_stop_nouns(path) if path else default_stop_nouns()


def counted_nouns(nouns, lang: str, stop: dict) -> list[str]:
    """``nouns`` less the stop-listed ones (a compound by its head)."""
    words = stop.get(lang, frozenset())
    return [n for n in nouns if n.split(":", 1)[0] not in words]
