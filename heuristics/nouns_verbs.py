"""Nouns and verbs of a tagged caption: lemmas, normalised, with multiword verbs joined.

``nouns`` are NOUN/PROPN lemmas and ``verbs`` VERB lemmas (Universal POS; AUX is never a
verb here), in order of first mention, each once. Three configurable joins
(:class:`ExtractionOptions`):

- English phrasal verbs join their particle with ``-`` as EPIC-KITCHENS-100 names verbs
  ('pick up' -> ``pick-up``). With dependency relations, the particle is the word with
  ``compound:prt`` whose head is the verb (UD's annotation of particles); without them
  (a tagger without a parser), it is the word right after the verb when its form is in
  :data:`PARTICLES` and its UPOS is ADP, PART or ADV.
- Light-verb constructions (noun or adjective + light verb, :data:`LIGHT_VERBS`) count as
  one verb ``'<noun>+<light stem>'`` (``साफ+कर``), not as the light verb alone; the host word
  is then not also a noun. With relations, the host is a word with ``compound:lvc`` on a
  VERB (UD's annotation, any light verb). Without, the host is the word right before a VERB
  whose lemma is a light verb (or, without a lemmatizer, whose form inflects one: te
  ``చేయడానికి`` ~ ``చేయు``): a NOUN or ADJ before hi/mr कर/हो (:data:`ALWAYS_LIGHT`;
  hi_pud annotates NOUN and ADJ hosts equally often), and before any light verb any word
  whose joined verb ``known_verb`` accepts (the class map lists it: te ``తయారు చేయు``, hi
  ``ध्यान देना``), since दे/ले/घे/செய்/చేయు are full verbs in most of their uses
  ("पानी दीजिए", give water).
- English noun compounds: consecutive NOUN/PROPN words form one noun named
  ``head:modifier[:modifier]`` in EPIC-KITCHENS-100's format (``water tap`` ->
  ``tap:water``; ``frying pan lid`` -> ``lid:frying:pan``); with relations, the modifiers
  are the ``compound`` dependents of the head noun. With ``of_phrases`` (set by
  :mod:`heuristics.class_rules` for class maps that name "X of Y" so), "top of bread crust"
  is one noun ``top:bread:crust`` (tagger without a parser).
- With ``known_verb`` (a class map), an English verb joins a particle across its object
  (``put X in Y`` -> ``put-in``) when the joined verb is known (:func:`_phrasal`), and an
  Indic light verb joins a host the class map lists with it.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from functools import cache

from rudder.languages import check_language

from .inflection import inflects

NOUN_UPOS = ("NOUN", "PROPN")
PARTICLES = frozenset(
    [
        "up",
        "down",
        "on",
        "off",
        "in",
        "out",
        "away",
        "back",
        "over",
        "around",
        "about",
        "through",
        "along",
        "apart",
        "aside",
        "together",
        "forward",
    ]
)
PARTICLE_UPOS = ("ADP", "PART", "ADV")
CLAUSE_BREAKS = frozenset(["then"])
# Light verbs (lemma -> stem used in the joined verb) per language: hi/mr do, be, give,
# take; ta do (செய், பண்ணு), undergo (படு); te do (చేయు, past stem చేసు), put (పెట్టు).
LIGHT_VERBS = {
    "hi": {"करना": "कर", "कर": "कर", "होना": "हो", "हो": "हो", "देना": "दे", "दे": "दे"}
    | {"लेना": "ले", "ले": "ले"},
    "mr": {"करणे": "कर", "कर": "कर", "होणे": "हो", "हो": "हो", "देणे": "दे", "दे": "दे"}
    | {"घेणे": "घे", "घे": "घे"},
    "ta": {"செய்": "செய்", "பண்ணு": "பண்ணு", "படு": "படு"},
    "te": {"చేయు": "చేయు", "చేసు": "చేయు", "పెట్టు": "పెట్టు"},
}
# Light stems that join any NOUN/ADJ host without a class map (UD hi_pud: 285 of its 447
# compound:lvc are करना, 71 होना).
ALWAYS_LIGHT = {"hi": ("कर", "हो"), "mr": ("कर", "हो")}
# Infinitive endings stripped from a light verb found through compound:lvc.
_INFINITIVE = {"hi": ("ना",), "mr": ("णे",)}


@dataclass(frozen=True)
class TaggedWord:
    """One tagged word: surface text, lemma, UPOS, and (when a parser ran) head and relation.

    ``head`` is 1-based within the caption (0 = root) as in CoNLL-U; None without a parser.
    """

    text: str
    lemma: str
    upos: str
    head: int | None = None
    deprel: str | None = None

    def to_list(self) -> list:
        return [self.text, self.lemma, self.upos, self.head, self.deprel]

    @classmethod
    def from_list(cls, values) -> TaggedWord:
        return cls(*values)


@dataclass(frozen=True)
class ExtractionOptions:
    """Which multiword joins :func:`extract` applies (see the module docstring)."""

    phrasal_verbs: bool = True
    particles: frozenset = PARTICLES
    light_verbs: bool = True
    light_verb_lemmas: dict = field(
        default_factory=lambda: {k: dict(v) for k, v in LIGHT_VERBS.items()}
    )
    light_verb_hosts: tuple = ("NOUN", "ADJ")
    noun_compounds: tuple = ("en",)
    of_phrases: tuple = ()  # languages where "N1 of N2" is one noun N1:N2 (EPIC's naming)


@cache
def _indic_normalizer(lang: str):
    from indicnlp.normalize.indic_normalize import IndicNormalizerFactory

    return IndicNormalizerFactory().get_normalizer(lang)


def normalise(lemma: str, lang: str) -> str:
    """A lemma in canonical form: NFC and trimmed; lower-cased for English; the
    indic-nlp script normaliser for mr/hi/ta/te (the one rudder's tokeniser applies)."""
    check_language(lang, "heuristics.nouns_verbs.normalise")
    text = unicodedata.normalize("NFC", lemma).strip()
    if lang == "en":
        return text.lower()
    return _indic_normalizer(lang).normalize(text)


def light_stem(lemma: str, form: str, lang: str, table: dict) -> str | None:
    """The light stem of a word (module docstring), or None: its lemma in ``table``, or,
    when the lemma is the form (no lemmatizer), the table entry its form inflects."""
    if lemma in table:
        return table[lemma]
    if lemma == form and lang != "en":
        return next((stem for key, stem in table.items() if inflects(form, key, lang)), None)
    return None


def _light_stem(lemma: str, lang: str, table: dict) -> str:
    if lemma in table:
        return table[lemma]
    for ending in _INFINITIVE.get(lang, ()):
        if lemma.endswith(ending) and len(lemma) > len(ending):
            return lemma[: -len(ending)]
    return lemma


def _has_relations(words) -> bool:
    return any(w.deprel is not None for w in words)


def _clause_break(words, lemmas, j: int) -> bool:
    """*then*, or *and* before a verb, starts a new clause (*and* between nouns does not)."""
    if lemmas[j] == "and":
        return j + 1 < len(words) and words[j + 1].upos == "VERB"
    return lemmas[j] in CLAUSE_BREAKS


def _phrasal(
    words, lemmas, index: int, options: ExtractionOptions, parsed: bool, known_verb=None
) -> int | None:
    """Index of the particle of the verb at ``index``, or None.

    With ``known_verb`` (a class map's test of a joined verb), the first particle or
    preposition of the verb's clause (up to the next verb or *and*/*then*), across the
    object, whose joined verb is known wins (``put X in Y`` -> ``put-in``).
    """
    if known_verb is not None:
        for j in range(index + 1, len(words)):
            if words[j].upos == "VERB" or _clause_break(words, lemmas, j):
                break
            joinable = words[j].upos in PARTICLE_UPOS or lemmas[j] in options.particles
            if lemmas[j] == "of" and j > index + 1:
                continue  # "of" across an object heads the noun's complement (spoons of sugar)
            if joinable and known_verb(f"{lemmas[index]}-{lemmas[j]}"):
                return j
    if parsed:
        return next(
            (j for j, w in enumerate(words) if w.deprel == "compound:prt" and w.head == index + 1),
            None,
        )
    nxt = index + 1
    if nxt < len(words) and words[nxt].upos in PARTICLE_UPOS and lemmas[nxt] in options.particles:
        return nxt
    return None


def _light_host(
    words, lemmas, index: int, stem, lang: str, options: ExtractionOptions, parsed: bool, known
) -> int | None:
    """Index of the light-verb host of the verb at ``index`` (light ``stem``), or None."""
    if parsed:
        return next(
            (j for j, w in enumerate(words) if w.deprel == "compound:lvc" and w.head == index + 1),
            None,
        )
    prev = index - 1
    if prev < 0 or stem is None:
        return None
    if known is not None and known(f"{lemmas[prev]}+{stem}"):
        return prev
    if words[prev].upos in options.light_verb_hosts and stem in ALWAYS_LIGHT.get(lang, ()):
        return prev
    return None


def _compounds(words, lang: str, options: ExtractionOptions, parsed: bool) -> dict[int, list[int]]:
    """Head index -> modifier indices (surface order) for noun compounds."""
    if lang not in options.noun_compounds:
        return {}
    out: dict[int, list[int]] = {}
    if parsed:
        for j, w in enumerate(words):
            head = (w.head or 0) - 1
            if (
                w.deprel == "compound"
                and w.upos in NOUN_UPOS
                and 0 <= head < len(words)
                and words[head].upos in NOUN_UPOS
            ):
                out.setdefault(head, []).append(j)
        return out
    run: list[int] = []
    runs = []
    for j, w in enumerate(words + [TaggedWord("", "", "X")]):
        if w.upos in NOUN_UPOS:
            run.append(j)
            continue
        if run:
            runs.append(run)
        run = []
    for run in runs:
        if len(run) > 1:
            out[run[-1]] = run[:-1]
    if lang in options.of_phrases:
        starts = {r[0]: r for r in runs}
        for run in runs:
            after = starts.get(run[-1] + 2)
            if after and normalise(words[run[-1] + 1].text, lang) == "of" and run[-1] not in out:
                out[run[-1]] = after  # "top of bread crust" -> top:bread:crust
    return out


def extract(
    words, lang: str, options: ExtractionOptions | None = None, known_verb=None
) -> tuple[list[str], list[str]]:
    """``(nouns, verbs)`` lemma lists of one tagged caption (see the module docstring).

    ``known_verb(name) -> bool`` (optional) lets an English verb join a particle across its
    object when the joined name is known (:func:`_phrasal`), and an Indic light verb join
    the host the class map lists with it (:func:`_light_host`)."""
    options = options or ExtractionOptions()
    words = list(words)
    lemmas = [normalise(w.lemma or w.text, lang) for w in words]
    parsed = _has_relations(words)
    used: set[int] = set()
    verbs: dict[int, str] = {}
    light_table = options.light_verb_lemmas.get(lang, {})
    light_known = known_verb if lang != "en" else None
    for i, w in enumerate(words):
        if w.upos != "VERB" or not lemmas[i]:
            continue
        name = lemmas[i]
        stem = light_stem(name, normalise(w.text, lang), lang, light_table)
        if options.light_verbs and lang in options.light_verb_lemmas and (parsed or stem):
            host = _light_host(words, lemmas, i, stem, lang, options, parsed, light_known)
            if host is not None and host not in used and lemmas[host]:
                name = f"{lemmas[host]}+{stem or _light_stem(name, lang, light_table)}"
                used.add(host)
        if options.phrasal_verbs and lang == "en":
            particle = _phrasal(words, lemmas, i, options, parsed, known_verb)
            if particle is not None:
                name = f"{name}-{lemmas[particle]}"
                used.add(particle)
        verbs[i] = name
    compounds = _compounds(words, lang, options, parsed)
    modifiers = {m for mods in compounds.values() for m in mods}
    nouns: dict[int, str] = {}
    for i, w in enumerate(words):
        if w.upos not in NOUN_UPOS or i in used or i in modifiers or not lemmas[i]:
            continue
        parts = [lemmas[i]] + [
            lemmas[m] for m in compounds.get(i, []) if m not in used and lemmas[m]
        ]
        nouns[i] = ":".join(parts)
    return list(dict.fromkeys(nouns.values())), list(dict.fromkeys(verbs.values()))
