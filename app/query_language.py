"""What the search tab says about a query's language before searching.

:func:`query_language` asks :func:`rudder.languages.identify_language` (a language, a
confidence, the script) when that function exists, else reads the letters' Unicode scripts
itself: letters of a script no supported language is written in (Chinese, Arabic, Cyrillic,
...) make the query *uncovered*, a query with no letter at all (emoji, punctuation, digits)
has *nothing searchable*.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from rudder.languages import NAMES, SUPPORTED, detect_language

# Unicode script (the first word of a letter's character name) -> languages written in it.
COVERED_SCRIPTS = {
    "LATIN": ("en",),
    "DEVANAGARI": ("mr", "hi"),
    "TAMIL": ("ta",),
    "TELUGU": ("te",),
}
# Character-name words that are not a script's name.
_NAME_ALIASES = {"CJK": "Han (Chinese characters)", "HANGUL": "Hangul (Korean)",
                 "HIRAGANA": "Japanese kana", "KATAKANA": "Japanese kana"}


@dataclass(frozen=True)
class QueryLanguage:
    """``lang``: a supported code, or None when nothing can be searched; ``script``: the
    name of an uncovered script the query is written in (None when covered or empty)."""

    lang: str | None
    script: str | None = None

    @property
    def nothing_searchable(self) -> bool:
        return self.lang is None and self.script is None


def letter_scripts(text: str) -> dict[str, int]:
    """Letter count per Unicode script (the first word of each letter's character name)."""
    counts: dict[str, int] = {}
    for char in text:
        if unicodedata.category(char).startswith("L"):
            script = unicodedata.name(char, "UNKNOWN").split(" ")[0]
            counts[script] = counts.get(script, 0) + 1
    return counts


def _fallback(text: str) -> QueryLanguage:
    counts = letter_scripts(text)
    if not counts:
        return QueryLanguage(None)
    covered = sum(n for script, n in counts.items() if script in COVERED_SCRIPTS)
    if 2 * covered <= sum(counts.values()):  # mostly letters of other scripts
        other = max((s for s in counts if s not in COVERED_SCRIPTS), key=counts.get)
        return QueryLanguage(None, _NAME_ALIASES.get(other, other.title()))
    return QueryLanguage(detect_language(text))


def query_language(text: str) -> QueryLanguage:
    """The language to search ``text`` in, or why there is none."""
    try:
        from rudder.languages import identify_language
    except ImportError:
        return _fallback(text)
    guess = identify_language(text)
    if guess.lang in SUPPORTED:
        return QueryLanguage(guess.lang)
    if not letter_scripts(text):
        return QueryLanguage(None)
    script = guess.script or _fallback(text).script or "an unknown script"
    return QueryLanguage(None, str(script))


def covered_scripts_text() -> str:
    """'Marathi and Hindi (Devanagari), ...' for messages."""
    parts = []
    for script, langs in COVERED_SCRIPTS.items():
        names = " and ".join(NAMES[code] for code in langs)
        parts.append(names if names == script.title() else f"{names} ({script.title()})")
    return ", ".join(parts)
