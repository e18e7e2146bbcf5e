"""What the search tab says about a query's language before searching.

:func:`query_language` reads :func:`rudder.languages.identify_language`: a query with no
letter at all (emoji, punctuation, digits) has *nothing searchable*; letters of a script no
supported language is written in (Chinese, Arabic, Cyrillic, ...) make it *uncovered*;
otherwise it has a supported language (``candidates``: the probabilities of the script's
languages, several when they share it, as Hindi and Marathi do).
"""

from __future__ import annotations

from dataclasses import dataclass

from rudder.languages import NAMES, SCRIPT_LANGUAGES, SUPPORTED, identify_language

# Unicode script names that readers may not know, spelled out.
_SCRIPT_NOTES = {"Han": "Han (Chinese characters)", "Hangul": "Hangul (Korean)",
                 "Hiragana": "Hiragana (Japanese)", "Katakana": "Katakana (Japanese)"}


@dataclass(frozen=True)
class QueryLanguage:
    """``lang``: a supported code, or None when nothing can be searched; ``script``: the
    name of an uncovered script the query is written in (None when covered or empty);
    ``candidates``: (language, probability) of the script's languages, best first."""

    lang: str | None
    script: str | None = None
    candidates: tuple = ()

    @property
    def nothing_searchable(self) -> bool:
        return self.lang is None and self.script is None


def script_name(script: str) -> str:
    """A Unicode script name as the page shows it ('Han (Chinese characters)')."""
    return _SCRIPT_NOTES.get(script, script)


def query_language(text: str) -> QueryLanguage:
    """The language to search ``text`` in, or why there is none."""
    guess = identify_language(text)
    if guess.lang is not None:
        return QueryLanguage(guess.lang, None, tuple(guess.candidates))
    if guess.script is None:
        return QueryLanguage(None)
    return QueryLanguage(None, script_name(guess.script))


def covered_scripts_text(languages=SUPPORTED) -> str:
    """'Hindi and Marathi (Devanagari), Tamil, Telugu, English (Latin)' for messages: the
    scripts of ``languages`` (default: the dataset languages a word vocabulary reads)."""
    parts = []
    for script, langs in SCRIPT_LANGUAGES.items():
        langs = tuple(code for code in langs if code in languages)
        if not langs:
            continue
        names = " and ".join(NAMES[code] for code in langs)
        parts.append(names if names == script else f"{names} ({script})")
    return ", ".join(parts)
