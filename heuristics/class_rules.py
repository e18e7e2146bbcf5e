"""Tagger output corrected by what the class maps know.

A tagger trained on web text mistags short imperatives ("open door": *open* ADJ, "place
plate": *place* NOUN, "wash knife": *wash* PROPN). The class maps (EPIC-KITCHENS-100 class
CSVs, the multilingual lexicon) list which words are verbs and which are nouns, so
:func:`resolve` retags a word where they settle it. Each rule is a flag of
:class:`ClassRules`; docs/heuristics.md ("Class-map rules") tabulates them with their
sources and measured effect. :func:`resolve` applies ``imperative``, ``disagreement``,
``lemmas`` and ``noun_phrases`` in this order (:data:`RESOLVE_RULES`);
:func:`extract_classes` and :func:`main_verb_class` the others.

Each rule's full statement, its source and what it is worth on EPIC-KITCHENS-100 are in
that table; the four of :func:`resolve` are the functions of :data:`RESOLVE_RULES`, each
with its rule's summary. For mr/hi/ta/te, ``imperative`` looks at the clause end, instances
match inflected forms, ``noun_phrases`` matches the lexicon's multiword nouns and
``lemmas`` falls back from lemmas that are not words (:mod:`heuristics.indic_rules`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import NamedTuple

from .indic_rules import clause_final, indic_word_lemmas, instance_matches
from .indic_rules import noun_phrases as indic_noun_phrases
from .nouns_verbs import (
    ALWAYS_LIGHT,
    NOUN_UPOS,
    PARTICLES,
    ExtractionOptions,
    extract,
    light_stem,
    normalise,
)
from .stop_nouns import default_stop_nouns

CLAUSE_OPENERS = frozenset(["then"])
# Tags of words that may come before a clause's verb ("now", "please", "I"), when no instance.
LEADING_UPOS = ("ADV", "INTJ", "PRON")
NOMINAL_CONTEXT = ("DET", "ADP", "AUX")
RETAGGABLE_AS_VERB = ("NOUN", "PROPN", "ADJ", "X")
# Tags a content noun is mistaken for in object position ("take lid": lid ADV).
RETAGGABLE_AS_NOUN = ("ADV", "ADJ", "ADP", "AUX", "INTJ", "X", "VERB", "SYM", "PART", "NUM")
# The small Indic taggers also read lexicon nouns as pronouns (mr तार "wire" PRON).
RETAGGABLE_AS_NOUN_INDIC = (*RETAGGABLE_AS_NOUN, "PRON")
_FUNCTION_WORDS = "of into onto from with to at by for under inside outside the a an and or then"
CLOSED_CLASS = PARTICLES | frozenset(_FUNCTION_WORDS.split())


@dataclass(frozen=True)
class ClassRules:
    """Which class-map rules apply (module docstring); all on by default."""

    imperative: bool = True
    disagreement: bool = True
    noun_phrases: bool = True
    lemmas: bool = True
    particles: bool = True
    known_verb_first: bool = True
    of_phrases: bool = True
    subject_verb: bool = True
    light_verbs: bool = True

    @classmethod
    def none(cls) -> ClassRules:
        return cls(*(False for _ in fields(cls)))


def inflection_stems(form: str) -> list[str]:
    """``form`` and the stems of its regular English endings, most likely first."""
    out = [form]
    for ending, restore in (
        ("ies", "y"),
        ("ied", "y"),
        ("ves", "f"),
        ("ves", "fe"),
        ("es", ""),
        ("s", ""),
    ):
        if form.endswith(ending) and len(form) > len(ending) + 2:
            out.append(form[: -len(ending)] + restore)
    for ending in ("ing", "ed"):
        stem = form[: -len(ending)]
        if form.endswith(ending) and len(stem) >= 2:
            out += [stem, stem + "e"]
            if len(stem) > 2 and stem[-1] == stem[-2]:
                out.append(stem[:-1])
    return list(dict.fromkeys(out))


class _Index:
    """The class map's instances of one language as sets, for word lookups."""

    def __init__(self, class_map, lang: str):
        verbs: set[str] = set()
        nouns: set[str] = set()
        self.phrases: dict[tuple[str, ...], str] = {}
        for pos, code, lemma in class_map.entries:
            if code != lang:
                continue
            if pos == "verb":
                verbs.add(lemma)
                if "-" in lemma and "+" not in lemma:
                    verbs.add(lemma.split("-", 1)[0])
            else:
                nouns.add(lemma)
                if ":" in lemma and lang == "en":
                    head, *mods = lemma.split(":")
                    self.phrases[tuple(mods + [head])] = lemma
                elif " " in lemma and lang != "en":
                    self.phrases[tuple(lemma.split())] = lemma
        self.longest = max((len(p) for p in self.phrases), default=0)
        self.verbs, self.nouns = frozenset(verbs), frozenset(nouns)


_INDEX_CACHE: dict[tuple[int, str, int], tuple] = {}


def _index(class_map, lang: str) -> _Index:
    """The :class:`_Index` of a class map, rebuilt when the map grows; the cache keeps the
    map alive so that its ``id`` is not reused while cached."""
    key = (id(class_map), lang, len(class_map))
    cached = _INDEX_CACHE.get(key)
    if cached is None or cached[0] is not class_map:
        if len(_INDEX_CACHE) >= 16:
            _INDEX_CACHE.clear()
        cached = _INDEX_CACHE[key] = (class_map, _Index(class_map, lang))
    return cached[1]


def _first(candidates, known: set[str] | frozenset[str]) -> str | None:
    return next((c for c in candidates if c in known), None)


class _Caption:
    """One caption as the rules of :func:`resolve` see it: the tagger's ``words`` (never
    changed), ``out`` (the words as the rules so far left them), and what every rule reads:
    normalised forms and lemmas, each word's class-map instances (verb, noun), the English
    clause-initial and mr/hi/ta/te clause-final positions."""

    def __init__(self, words, lang: str, class_map, rules: ClassRules, options):
        self.words, self.out = list(words), list(words)
        self.lang, self.class_map, self.rules = lang, class_map, rules
        self.index = _index(class_map, lang)
        self.forms = [normalise(w.text, lang) for w in self.words]
        self.lemmas = [normalise(w.lemma or w.text, lang) for w in self.words]
        self.light = options.light_verb_lemmas.get(lang, {}) if options.light_verbs else {}
        self.initials = (
            _clause_initial(self.words, self.forms, self.lemmas, self.index)
            if lang == "en" else set()
        )
        self.finals = {  # verb-final (SOV) clauses
            i for i in range(len(self.words))
            if lang != "en" and clause_final(self.forms, i, lang)
        }
        self.matches = [self._instances(i) for i in range(len(self.words))]
        self.settled: set[int] = set()  # words the imperative rule tagged

    def _instances(self, i: int) -> tuple[str | None, str | None]:
        """The verb and the noun instance word ``i`` is (None: none)."""
        index, w = self.index, self.words[i]
        if self.lang == "en":
            stems = [self.lemmas[i], *inflection_stems(self.forms[i])]
            return _first(stems, index.verbs), _first(stems, index.nouns)
        final = i in self.finals and self.rules.imperative
        return instance_matches(
            self.lemmas[i], self.forms[i], index.verbs, index.nouns, self.lang, final, w.upos
        )

    def retag(self, i: int, upos: str) -> None:
        """Word ``i`` becomes ``upos``; a word whose tag changes takes the instance of its new
        part of speech as lemma (when it is one)."""
        w = self.words[i]
        lemma = w.lemma
        if upos != w.upos:
            verb, noun = self.matches[i]
            lemma = (verb if upos == "VERB" else noun if upos in NOUN_UPOS else None) or lemma
        self.out[i] = replace(w, upos=upos, lemma=lemma)


def _imperative(caption: _Caption):
    """Rule ``imperative`` (grammar: an imperative clause starts with its verb, a verb-final
    clause ends with it; catenative verbs; the class map's verb instances): a verb instance at
    an English clause-initial position (or right after a catenative), or at a mr/hi/ta/te
    clause end, is the VERB; an English clause-initial word that is no noun instance before
    the -ing form of a verb instance is a catenative, tagged AUX."""
    catenatives = set()
    for i in range(len(caption.words)):
        verb, noun = caption.matches[i]
        initial = i in caption.initials
        if (initial or i - 1 in catenatives or i in caption.finals) and verb is not None:
            caption.retag(i, "VERB")
        elif initial and noun is None and _gerund_follows(caption.forms, i, caption.index):
            caption.retag(i, "AUX")  # catenative, like an auxiliary: "continue washing"
            catenatives.add(i)
        else:
            continue
        caption.settled.add(i)
    return caption.out


def _disagreement(caption: _Caption):
    """Rule ``disagreement`` (the class map or lexicon; grammar: closed classes, nominal
    context, a verb's object): where the tagger disagrees with the instances, a verb instance
    that is no noun instance is a VERB (not after DET/ADP/AUX), a closed-class word tagged
    NOUN/PROPN is an ADP, and a noun instance in object position is a NOUN; words the
    imperative rule tagged and words a light verb joins are left alone."""
    out, forms, lang = caption.out, caption.forms, caption.lang
    for i, w in enumerate(caption.words):
        if i in caption.settled or _before_light(
            caption.lemmas, forms, i, lang, caption.light, caption.class_map
        ):
            continue
        verb, noun = caption.matches[i]
        upos = w.upos
        after_verb = i > 0 and out[i - 1].upos == "VERB"
        after_nominal = i > 0 and out[i - 1].upos in NOMINAL_CONTEXT
        if verb and not noun and upos in RETAGGABLE_AS_VERB and not after_nominal:
            caption.retag(i, "VERB")
        elif upos in NOUN_UPOS and not noun and forms[i] in CLOSED_CLASS:
            caption.retag(i, "ADP")  # closed-class words are no nouns ("onto" PROPN)
        elif (
            noun
            and upos in (RETAGGABLE_AS_NOUN if lang == "en" else RETAGGABLE_AS_NOUN_INDIC)
            and forms[i] not in CLOSED_CLASS
            and i not in caption.initials
            and (not verb or (upos == "VERB" and after_verb)
                 or (lang == "en" and upos != "VERB" and _object_of_verb(out, i)))
        ):
            caption.retag(i, "NOUN")  # a verb's object: "take lid" (ADV), "put sponge down"
    return out


def _lemmas(caption: _Caption):
    """Rule ``lemmas`` (the class map's instances, English regular inflection): a VERB or
    NOUN whose lemma, form or a regular stem of its form is an instance takes that instance
    as lemma (the not-a-word fallback of the rule is :func:`word_lemmas`)."""
    out = caption.out
    for i, w in enumerate(out):
        verb, noun = caption.matches[i]
        known = verb if w.upos == "VERB" else noun if w.upos in NOUN_UPOS else None
        out[i] = replace(w, lemma=known or w.lemma)
    return out


def _noun_phrases(caption: _Caption):
    """Rule ``noun_phrases`` (the class map's multiword noun instances): English instances
    (``board:chopping``) found on the words become NOUN words, never over a word a rule made a
    VERB; mr/hi/ta/te, :func:`heuristics.indic_rules.noun_phrases`."""
    out, index = caption.out, caption.index
    if not index.phrases:
        return out
    if caption.lang != "en":
        verb_instances = {
            i for i, w in enumerate(out) if w.upos == "VERB" and caption.matches[i][0] is not None
        }
        return indic_noun_phrases(out, caption.forms, index.phrases, caption.lang, verb_instances)
    made_verb = {i for i, (w, o) in enumerate(zip(caption.words, out, strict=False))
                 if o.upos == "VERB" and w.upos != "VERB"}
    initial_verbs = _initial_verbs(out, caption.initials, caption.rules)
    return _english_noun_phrases(out, caption.forms, index, made_verb | initial_verbs)


class Rule(NamedTuple):
    """One rule of :func:`resolve`: its :class:`ClassRules` flag and its function."""

    name: str
    apply: Callable[[_Caption], list]


# The rules of resolve, applied in this order, each on the words the previous ones left
# (docs/heuristics.md lists them in this order).
RESOLVE_RULES = (
    Rule("imperative", _imperative),
    Rule("disagreement", _disagreement),
    Rule("lemmas", _lemmas),
    Rule("noun_phrases", _noun_phrases),
)


def resolve(words, lang: str, class_map, rules: ClassRules = ClassRules(), options=None):
    """``words`` retagged and re-lemmatised by the class-map rules (module docstring): each
    rule of :data:`RESOLVE_RULES` that ``rules`` turns on, in order."""
    caption = _Caption(words, lang, class_map, rules, options or ExtractionOptions())
    for rule in RESOLVE_RULES:
        if getattr(rules, rule.name):
            caption.out = rule.apply(caption)
    return caption.out


def _before_light(lemmas, forms, i: int, lang: str, light: dict, class_map) -> bool:
    """The next word is a light verb that joins ``words[i]``: hi/mr कर/हो, or one whose
    joined verb the class map lists (:func:`heuristics.nouns_verbs.extract`)."""
    if i + 1 >= len(lemmas):
        return False
    stem = light_stem(lemmas[i + 1], forms[i + 1], lang, light)
    if stem is None:
        return False
    listed = class_map.lookup("verb", lang, f"{lemmas[i]}+{stem}") is not None
    return listed or stem in ALWAYS_LIGHT.get(lang, ())


def _gerund_follows(forms, i: int, index: _Index) -> bool:
    """The next word is the -ing form of a verb instance."""
    nxt = i + 1
    return (
        nxt < len(forms)
        and forms[nxt].endswith("ing")
        and _first(inflection_stems(forms[nxt]), index.verbs) is not None
    )


def _object_of_verb(out, i: int) -> bool:
    """A word before ``i`` is a VERB: ``i`` follows the clause's verb ("put down plate",
    "pour rice onto plate")."""
    return any(w.upos == "VERB" for w in out[:i])


def _clause_initial(words, forms, lemmas, index: _Index) -> set[int]:
    """English clause-initial positions: the first word after the leading words tagged
    :data:`LEADING_UPOS` that are no instances, and every word after *then*."""
    if not words:
        return set()
    lead = 0
    while lead < len(words) - 1 and words[lead].upos in LEADING_UPOS:
        stems = [lemmas[lead], *inflection_stems(forms[lead])]
        if _first(stems, index.verbs) or _first(stems, index.nouns):
            break
        lead += 1
    return {lead} | {i for i in range(1, len(words)) if forms[i - 1] in CLAUSE_OPENERS}


def _initial_verbs(words, initials: set[int], rules: ClassRules) -> set[int]:
    if not rules.imperative:
        return set()
    return {i for i in initials if words[i].upos == "VERB"}


def _english_noun_phrases(words, forms, index: _Index, verbs: set[int]):
    """Multiword noun instances on the words become NOUN words (never over ``verbs``)."""
    words, i = list(words), 0
    while i < len(words):
        for width in range(min(index.longest, len(words) - i), 1, -1):
            span = range(i, i + width)
            if verbs & set(span):
                continue
            phrase = tuple(normalise(words[k].lemma or words[k].text, "en") for k in span)
            surface = tuple(forms[k] for k in span)
            if phrase in index.phrases or surface in index.phrases:
                parts = phrase if phrase in index.phrases else surface
                for k, part in zip(span, parts, strict=False):
                    words[k] = replace(words[k], upos="NOUN", lemma=part)
                i += width
                break
        else:
            i += 1
    return words


def word_lemmas(words, lang: str, vocabulary, class_map=None):
    """VERB/NOUN lemmas that are not words replaced (module docstring, ``lemmas``; for
    mr/hi/ta/te :func:`heuristics.indic_rules.indic_word_lemmas`, where ``vocabulary`` is the
    tagger's treebank lemmas, :func:`lemma_vocabulary`)."""
    if not vocabulary:
        return list(words)
    index = _index(class_map, lang) if class_map is not None else None
    if lang != "en":
        verbs, nouns = (index.verbs, index.nouns) if index else (frozenset(), frozenset())
        return indic_word_lemmas(words, lang, frozenset(vocabulary), verbs, nouns)
    out = []
    for w in words:
        lemma = normalise(w.lemma or w.text, lang)
        instances = () if index is None else index.verbs if w.upos == "VERB" else index.nouns
        if w.upos in ("VERB", *NOUN_UPOS) and lemma not in vocabulary and lemma not in instances:
            form = normalise(w.text, lang)
            stems = [lemma + "e", *inflection_stems(form)[1:]]
            w = replace(w, lemma=_first(stems, vocabulary) or w.lemma)
        out.append(w)
    return out


@cache
def _english_subjects() -> frozenset:
    return default_stop_nouns()["en"]


def subject_verbs(words, lang: str, vocabulary=()):
    """The verb after a clause-initial generic subject retagged (module docstring)."""
    words = list(words)
    if lang != "en" or not words:
        return words
    subjects = _english_subjects()
    start = 1 if words[0].upos == "DET" else 0
    verb = start + 1
    if verb >= len(words) or normalise(words[start].text, lang) not in subjects:
        return words
    w, form = words[verb], normalise(words[verb].text, lang)
    stems = inflection_stems(form)[1:]
    if w.upos in ("NOUN", "PROPN", "ADP", "ADJ", "X") and form.endswith(("s", "ed")) and stems:
        fallback = w.lemma if normalise(w.lemma, lang) != form else stems[0]
        lemma = _first(stems, vocabulary) or fallback
        words[verb] = replace(w, upos="VERB", lemma=lemma)
    return words


def corpus_vocabulary(tagged, lang: str) -> frozenset:
    """The normalised surface words of tagged captions: what counts as an English word for
    :func:`word_lemmas`."""
    return frozenset(normalise(w.text, lang) for words in tagged for w in words)


def lemma_vocabulary(tagger, tagged, lang: str) -> frozenset:
    """What counts as a word for :func:`word_lemmas`: English, the captions' surface words
    (:func:`corpus_vocabulary`); mr/hi/ta/te, whose lemmas are rarely surface words, the
    lemmas of the tagger's training treebank (``tagger.known_lemmas``; none: no fallback)."""
    if lang == "en":
        return corpus_vocabulary(tagged, lang)
    known = getattr(tagger, "known_lemmas", None)
    return known(lang) if known is not None else frozenset()


def extract_classes(
    words,
    lang: str,
    class_map,
    options=None,
    rules: ClassRules = ClassRules(),
    vocabulary=None,
):
    """``(nouns, verbs, noun_classes, verb_classes)`` of one tagged caption, with the rules;
    ``vocabulary`` (:func:`corpus_vocabulary`) enables the not-a-word lemma fallback."""
    options = options or ExtractionOptions()
    if rules.subject_verb:
        words = subject_verbs(words, lang, vocabulary or ())
    if rules.lemmas and vocabulary:
        words = word_lemmas(words, lang, vocabulary, class_map)
    known = None
    if class_map is not None and len(class_map):
        words = resolve(words, lang, class_map, rules, options)
        if rules.of_phrases and class_map.partitive_heads(lang):
            options = replace(options, of_phrases=(*options.of_phrases, lang))
        if rules.particles if lang == "en" else rules.light_verbs:
            known = lambda verb: class_map.lookup("verb", lang, verb) is not None
    nouns, verbs = extract(words, lang, options, known_verb=known)
    if class_map is None:
        return nouns, verbs, [], []
    return (
        nouns,
        verbs,
        class_map.classes("noun", lang, nouns),
        class_map.classes("verb", lang, verbs),
    )


def main_verb_class(verb_classes, rules: ClassRules = ClassRules()) -> str | None:
    """The caption's main verb class: the first one, or with ``known_verb_first`` the first
    that is not a singleton ``verb:<lang>:<lemma>`` class (module docstring)."""
    if rules.known_verb_first:
        known = [c for c in verb_classes if not c.startswith("verb:")]
        if known:
            return known[0]
    return verb_classes[0] if verb_classes else None


__all__ = [
    "ClassRules",
    "corpus_vocabulary",
    "extract_classes",
    "lemma_vocabulary",
    "main_verb_class",
    "resolve",
    "word_lemmas",
]
