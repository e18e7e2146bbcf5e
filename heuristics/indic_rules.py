"""Class-map rules for Marathi, Hindi, Tamil and Telugu: the rules of
:mod:`heuristics.class_rules` where the lexicon or class map provides them.

These languages put the verb last (SOV) and inflect by suffixes, so the English rules of
:mod:`heuristics.class_rules` become:

- instance matching (:func:`instance_matches`): a word is a verb or noun instance when its
  lemma or form is one, else when its form is a suffix inflection of exactly one instance
  (:func:`heuristics.inflection.inflects`, the lexicon tagger's rule: ``मोजा`` ~
  ``मोजणे``, ``కట్టండి`` ~ ``కట్టు``); a form inflecting both a verb and a noun instance
  (mr ``कापा`` ~ ``कापड`` cloth and ``कापणे`` cut) is the verb at the end of a clause, else
  what the tagger says it is (NOUN/PROPN or VERB), else neither.
- ``imperative`` at the clause end (:func:`clause_final`): the last word of a caption, or the
  word before a clause-opening *then* (hi फिर, mr मग, ta பிறகு, te తర్వాత/తరువాత), that is a
  verb instance is the VERB ("कागद मोजा": *मोजा* tagged NOUN).
- ``noun_phrases`` (:func:`noun_phrases`): a multiword noun instance (mr ``कागदी कप``, ta
  ``ஐஸ்கிரீம் குச்சி``) found on the words, each word equal to its part or a suffix
  inflection of it (``कागदी कपला``), is one noun: its last word the NOUN with the instance
  as lemma, the others ``X``; never over a VERB that is a verb instance (``कागद कापा``,
  "cut the paper", is no ``कागदी कप``).
- lemmas (:func:`indic_word_lemmas`): a NOUN/VERB lemma that is not a word (neither its
  surface form, nor a lemma of the tagger's training treebank, ``vocabulary``, nor a
  class-map instance: the lemmatizer's invention, mr ``पाचपन`` for ``पाचपन्नास``) falls back
  to the instance its form inflects, else the treebank lemma its form inflects (the
  longest), else the surface form. A lemma equal to its form is a word: replacing those
  too cost 7 points of lemma accuracy on Hindi. Measured on the UD files in
  ``docs/heuristics.md``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from .inflection import inflects
from .nouns_verbs import NOUN_UPOS, normalise

# The clause-opening "then" of each language (the word after a clause-final verb).
CLAUSE_OPENERS = {
    "hi": ("फिर",),
    "mr": ("मग",),
    "ta": ("பிறகு",),
    "te": ("తర్వాత", "తరువాత"),
}
_MIN_STEM = 3


@lru_cache(maxsize=4)
def _openers(lang: str) -> frozenset:
    return frozenset(normalise(w, lang) for w in CLAUSE_OPENERS.get(lang, ()))


def clause_final(forms, i: int, lang: str) -> bool:
    """``forms[i]`` ends a clause: the last word, or the word before a clause-opening *then*."""
    return i == len(forms) - 1 or forms[i + 1] in _openers(lang)


@lru_cache(maxsize=16)
def _by_prefix(lemmas: frozenset) -> dict:
    """Lemmas grouped by their first code points, longest first in each group."""
    groups: dict[str, list[str]] = {}
    for lemma in lemmas:
        if len(lemma) >= _MIN_STEM:
            groups.setdefault(lemma[:_MIN_STEM], []).append(lemma)
    return {k: sorted(v, key=lambda lemma: (-len(lemma), lemma)) for k, v in groups.items()}


def inflected_lemma(form: str, lemmas: frozenset, lang: str) -> str | None:
    """The longest of ``lemmas`` that ``form`` is a suffix inflection of, or None."""
    return next(
        (
            lemma
            for lemma in _by_prefix(lemmas).get(form[:_MIN_STEM], ())
            if inflects(form, lemma, lang, _MIN_STEM)
        ),
        None,
    )


def instance_matches(
    lemma: str,
    form: str,
    verbs: frozenset,
    nouns: frozenset,
    lang: str,
    final: bool = False,
    upos: str = "X",
):
    """``(verb, noun)`` instances of one word (module docstring), each None when absent. A
    form inflecting both is the verb when ``final`` (:func:`clause_final`; verb-final
    clauses), else what the tagger's ``upos`` says (NOUN/PROPN or VERB), else neither."""
    verb = next((c for c in (lemma, form) if c in verbs), None)
    noun = next((c for c in (lemma, form) if c in nouns), None)
    if verb is None and noun is None:
        verb, noun = inflected_lemma(form, verbs, lang), inflected_lemma(form, nouns, lang)
        if verb is not None and noun is not None:
            if final or upos == "VERB":
                return verb, None
            return (None, noun) if upos in NOUN_UPOS else (None, None)
    return verb, noun


def _part_of(form: str, part: str, lang: str) -> bool:
    return form == part or inflects(form, part, lang, min(_MIN_STEM, max(len(part) - 1, 1)))


def noun_phrases(words, forms, phrases: dict, lang: str, verbs: set):
    """Multiword noun instances on the words (module docstring); ``phrases`` maps the
    instances' words (a tuple) to the instance; ``verbs`` (indices) are never covered."""
    words, i = list(words), 0
    longest = max((len(p) for p in phrases), default=0)
    while i < len(words):
        for width in range(min(longest, len(words) - i), 1, -1):
            span = range(i, i + width)
            lemma = next(
                (
                    lemma
                    for parts, lemma in phrases.items()
                    if len(parts) == width
                    and all(_part_of(forms[k], p, lang) for k, p in zip(span, parts, strict=False))
                ),
                None,
            )
            if lemma is not None and not verbs & set(span):
                for k in span[:-1]:
                    words[k] = replace(words[k], upos="X")
                words[span[-1]] = replace(words[span[-1]], upos="NOUN", lemma=lemma)
                i += width
                break
        else:
            i += 1
    return words


def indic_word_lemmas(
    words, lang: str, vocabulary: frozenset, verbs=frozenset(), nouns=frozenset()
):
    """NOUN/VERB lemmas that are not words replaced (module docstring); ``verbs``/``nouns``
    are the class map's instances."""
    out = []
    for w in words:
        lemma = normalise(w.lemma or w.text, lang)
        form = normalise(w.text, lang)
        known = lemma == form or lemma in vocabulary or lemma in verbs or lemma in nouns
        if w.upos in ("VERB", *NOUN_UPOS) and not known:
            instances = verbs if w.upos == "VERB" else nouns
            w = replace(
                w,
                lemma=inflected_lemma(form, instances, lang)
                or inflected_lemma(form, vocabulary, lang)
                or form,
            )
        out.append(w)
    return out


__all__ = [
    "CLAUSE_OPENERS",
    "clause_final",
    "indic_word_lemmas",
    "inflected_lemma",
    "instance_matches",
    "noun_phrases",
]
