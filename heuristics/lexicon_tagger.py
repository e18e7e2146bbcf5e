"""A tagger built from manual noun/verb annotations and a lexicon (no model to train)."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from typing import ClassVar

from rudder.languages import check_language

from .inflection import INFLECTION_LIMITS, inflects
from .nouns_verbs import TaggedWord, normalise
from .taggers import tokenize_all


class LexiconTagger:
    """Tags the words of a lexicon of noun and verb lemmas, and their inflected forms.

    Built from manual annotations: ``entries`` are ``(pos, lang, lemma)`` (the lexicon TSV,
    :func:`heuristics.classes.lexicon_entries`) and ``captions`` are
    ``(lang, text, nouns, verbs)`` rows of a dataset whose annotators marked noun and verb
    lemmas. When a marked one-word lemma is not itself in its caption, the caption token
    sharing the longest prefix with it (at least half the lemma, 2 code points or more) is
    learned as an inflected form of it (``spun`` -> ``spin``). Matching at each position,
    first rule that applies: a multiword lemma (``कागज़ का कप`` ~ ``कागज़ के कप``; each word may
    be inflected); the token equal to a lemma (when a token is a lemma of both parts of speech,
    the one annotators marked more often, then noun); a learned form; suffix inflection of
    the longest lemma: with ``p`` the length of their common prefix,
    ``p >= max(min_stem, len(l) - max_cut)`` and ``len(t) - p <= max_suffix`` (code points,
    :attr:`LIMITS` per language;
    ``बांधा`` ~ ``बांधणे``, ``पेन्सिलीला`` ~ ``पेन्सिल``, ``cutting`` ~ ``cut``). Unmatched tokens are
    tagged ``X``.
    """

    LIMITS: ClassVar[dict[str, tuple[int, int]]] = INFLECTION_LIMITS

    def __init__(self, entries, captions=(), min_stem: int = 3):
        from rudder.text import tokenize

        self.min_stem = min_stem
        known: dict[
            tuple[str, tuple[str, ...], str, str], int
        ] = {}  # (lang, parts, lemma, pos) -> marks
        for pos, lang, lemma in entries:
            parts = tuple(tokenize(lemma, lang))
            if parts:
                known.setdefault((lang, parts, normalise(lemma, lang), pos), 0)
        learned: dict[tuple[str, str], Counter] = {}
        for lang, text, nouns, verbs in captions:
            tokens = tokenize(text, lang)
            for lemma, pos in [(n, "noun") for n in nouns or ()] + [
                (v, "verb") for v in verbs or ()
            ]:
                parts, lemma = tuple(tokenize(lemma, lang)), normalise(lemma, lang)
                if not parts:
                    continue
                key = (lang, parts, lemma, pos)
                known[key] = known.get(key, 0) + 1
                if len(parts) == 1 and tokens and parts[0] not in tokens:
                    best = max(tokens, key=lambda t: len(os.path.commonprefix([t, parts[0]])))
                    if len(os.path.commonprefix([best, parts[0]])) >= max(
                        2, -(-len(parts[0]) // 2)
                    ):
                        learned.setdefault((lang, best), Counter())[(lemma, pos)] += 1
        self.forms = {key: counts.most_common(1)[0][0] for key, counts in sorted(learned.items())}
        self.lemmas: dict[str, list[tuple[tuple[str, ...], str, str]]] = {}
        exact: dict[tuple[str, str], tuple[int, str, str]] = {}
        for (lang, parts, lemma, pos), marks in sorted(known.items()):
            self.lemmas.setdefault(lang, []).append((parts, lemma, pos))
            if len(parts) == 1 and marks > exact.get((lang, parts[0]), (-1,))[0]:
                exact[(lang, parts[0])] = (marks, lemma, pos)
        # Candidates by what a matching token must start with: a one-word lemma shares at
        # least ``min_stem`` code points with it, a multiword one at least its first one.
        self._single: dict[tuple[str, str], list] = {}
        self._multi: dict[tuple[str, str], list] = {}
        for lang, items in self.lemmas.items():
            items.sort(key=lambda item: (-len(item[0]), -len("".join(item[0])), item))
            for item in items:
                first = item[0][0]
                if len(item[0]) > 1:
                    self._multi.setdefault((lang, first[:1]), []).append(item)
                elif len(first) >= min_stem:
                    self._single.setdefault((lang, first[:min_stem]), []).append(item)
        self._exact = {key: (lemma, pos) for key, (_, lemma, pos) in exact.items()}
        payload = json.dumps(
            [
                sorted(self.lemmas.items()),
                sorted(self.forms.items()),
                sorted(self._exact.items()),
                [min_stem, sorted(self.LIMITS.items())],
            ],
            ensure_ascii=False,
        )
        self._id = "lexicon:" + hashlib.sha256(payload.encode()).hexdigest()[:16]

    def _inflects(self, token: str, lemma: str, lang: str, part: bool = False) -> bool:
        """Suffix inflection (class docstring); a word of a multiword lemma needs a stem of
        only ``len - 1`` (at least 1) when shorter than ``min_stem`` (का ~ के, कप ~ कपवर)."""
        stem = min(self.min_stem, max(len(lemma) - 1, 1)) if part else self.min_stem
        return inflects(token, lemma, lang, stem)

    def _at(self, tokens: list[str], i: int, lang: str):
        """The longest lexicon match starting at ``tokens[i]``: (width, lemma, pos) or None."""
        for parts, lemma, pos in self._multi.get((lang, tokens[i][:1]), ()):
            width = len(parts)
            if i + width <= len(tokens) and all(
                t == p or self._inflects(t, p, lang, part=True)
                for t, p in zip(tokens[i : i + width], parts, strict=False)
            ):
                return width, lemma, pos
        exact = self._exact.get((lang, tokens[i]))
        if exact is not None:
            return (1, *exact)
        learned = self.forms.get((lang, tokens[i]))
        if learned is not None:
            return (1, *learned)
        for parts, lemma, pos in self._single.get((lang, tokens[i][: self.min_stem]), ()):
            if self._inflects(tokens[i], parts[0], lang):
                return 1, lemma, pos
        return None

    def model_id(self, lang: str) -> str:
        check_language(lang, "LexiconTagger")
        return self._id

    def tag_tokens(self, token_lists, lang: str) -> list[list[TaggedWord]]:
        check_language(lang, "LexiconTagger")
        upos = {"noun": "NOUN", "verb": "VERB"}
        out = []
        for tokens in token_lists:
            tokens, words, i = list(tokens), [], 0
            while i < len(tokens):
                hit = self._at(tokens, i, lang)
                if hit is None:
                    words.append(TaggedWord(tokens[i], tokens[i], "X"))
                    i += 1
                    continue
                width, lemma, pos = hit
                words.append(TaggedWord(" ".join(tokens[i : i + width]), lemma, upos[pos]))
                i += width
            out.append(words)
        return out

    def tag(self, texts, lang: str) -> list[list[TaggedWord]]:
        return self.tag_tokens(tokenize_all(texts, lang), lang)
