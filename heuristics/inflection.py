"""Suffix inflection: whether a word form is an inflected form of a lemma.

The rule the lexicon tagger (:mod:`heuristics.lexicon_tagger`), the light-verb joins of
:mod:`heuristics.nouns_verbs` and the Indic class rules (:mod:`heuristics.indic_rules`) share.
"""

from __future__ import annotations

import os

# Inflection limits per language (code points): ``(max_cut, max_suffix)``. English inflects
# by short suffixes on the whole lemma (or the lemma less a final e); the Indic languages by
# longer suffixes that may replace a final vowel sign or an infinitive ending (मोड़ना -> मोड़िए).
INFLECTION_LIMITS = {"en": (1, 4), "mr": (2, 6), "hi": (2, 6), "ta": (2, 6), "te": (2, 6)}


def inflects(token: str, lemma: str, lang: str, min_stem: int = 3) -> bool:
    """``token`` is a suffix inflection of ``lemma``: with ``p`` the length of their common
    prefix, ``p >= max(min_stem, len(lemma) - max_cut)`` and ``len(token) - p <= max_suffix``
    (:data:`INFLECTION_LIMITS`; ``बांधा`` ~ ``बांधणे``, ``पेन्सिलीला`` ~ ``पेन्सिल``)."""
    max_cut, max_suffix = INFLECTION_LIMITS[lang]
    prefix = len(os.path.commonprefix([token, lemma]))
    return prefix >= max(min_stem, len(lemma) - max_cut) and len(token) - prefix <= max_suffix
