"""Class-map rules on hand-tagged captions (the tagger errors issue 11 reports)."""

from dataclasses import replace

import pytest

from heuristics.class_rules import (
    ClassRules,
    corpus_vocabulary,
    extract_classes,
    inflection_stems,
    main_verb_class,
    word_lemmas,
)
from heuristics.classes import ClassMap
from heuristics.nouns_verbs import TaggedWord

VERBS = {
    "0": ["take", "take-out", "pick-up"],
    "1": ["put", "put-on", "put-down", "place", "put-of"],
    "2": ["wash", "soap"],
    "3": ["open"],
    "5": ["put-in", "put-into", "place-in"],
}
NOUNS = {
    "3": ["cupboard", "door", "cupboard:open"],
    "4": ["knife"],
    "6": ["lid"],
    "7": ["board", "board:chopping"],
    "8": ["sink"],
    "9": ["plate", "top:plate"],
    "10": ["spoon", "soap:spoon", "spoon:sugar"],
    "11": ["mixture", "top:mixture"],
    "12": ["pan", "top:pan"],
    "13": ["soap"],
    "42": ["top"],
    "43": ["top:bowl"],
}


@pytest.fixture(scope="module")
def classes():
    out = ClassMap()
    for pos, table in (("verb", VERBS), ("noun", NOUNS)):
        for concept, lemmas in table.items():
            for lemma in lemmas:
                out.add(pos, "en", lemma, concept, "test")
    return out


def tagged(*items):
    """("word/UPOS" or "word/UPOS/lemma") -> TaggedWord list."""
    out = []
    for item in items:
        parts = item.split("/")
        out.append(TaggedWord(parts[0], parts[2] if len(parts) > 2 else parts[0], parts[1]))
    return out


def run(classes, words, rules=None, vocabulary=None):
    rules = rules or ClassRules()
    nouns, verbs, noun_classes, verb_classes = extract_classes(
        words, "en", classes, rules=rules, vocabulary=vocabulary
    )
    return nouns, verbs, noun_classes, main_verb_class(verb_classes, rules)


def test_imperative_verb_tagged_adj_or_noun(classes):
    words = tagged("open/ADJ", "door/NOUN")
    assert run(classes, words)[1:] == (["open"], ["3"], "3")
    assert run(classes, words, ClassRules.none())[1] == []  # the bare tagger loses the verb
    # a word that is both a noun and a verb instance is the verb at the start of a clause
    assert run(classes, tagged("soap/NOUN", "knife/NOUN"))[1] == ["soap"]


def test_catenative_and_closed_class_words(classes):
    # "still"/"continue" before a gerund are neither nouns nor verbs; the gerund is the verb
    for first in ("still/NOUN", "continue/NOUN"):
        nouns, verbs, _, verb = run(classes, tagged(first, "washing/NOUN", "pan/NOUN"))
        assert (nouns, verbs, verb) == (["pan"], ["wash"], "2")
    # a preposition tagged PROPN is no noun, and it joins the verb across the object
    nouns, verbs, _, _ = run(classes, tagged("put/NOUN", "plate/NOUN", "into/PROPN", "sink/NOUN"))
    assert (nouns, verbs) == (["plate", "sink"], ["put-into"])


def test_disagreement_both_ways(classes):
    nouns, verbs, _, verb = run(classes, tagged("still/ADV", "washing/PROPN", "pan/PROPN"))
    assert (nouns, verbs, verb) == (["pan"], ["wash"], "2")
    nouns, verbs, noun_classes, _ = run(classes, tagged("take/VERB", "lid/ADV"))
    assert (nouns, noun_classes) == (["lid"], ["6"])
    # a noun-and-verb instance tagged VERB right after the verb is its object
    assert run(classes, tagged("put/VERB", "soap/VERB", "down/ADV"))[:2] == (["soap"], ["put-down"])
    # after a determiner an adjective stays one ("the open door" names no action)
    assert run(classes, tagged("take/VERB", "the/DET", "open/ADJ", "door/NOUN"))[1] == ["take"]
    without = replace(ClassRules(), disagreement=False)
    assert run(classes, tagged("take/VERB", "lid/ADV"), without)[0] == []


def test_multiword_noun_never_absorbs_the_verb(classes):
    nouns, verbs, noun_classes, verb = run(classes, tagged("open/NOUN", "cupboard/NOUN"))
    assert (nouns, verbs, noun_classes, verb) == (["cupboard"], ["open"], ["3"], "3")
    nouns = run(classes, tagged("wash/VERB", "chopping/VERB", "board/NOUN"))[0]
    assert nouns == ["board:chopping"]
    rules = replace(ClassRules(), noun_phrases=False)
    assert run(classes, tagged("wash/VERB", "chopping/VERB", "board/NOUN"), rules)[0] == ["board"]


def test_particle_across_the_object(classes):
    assert run(classes, tagged("put/VERB", "plate/NOUN", "in/ADP", "sink/NOUN")) == (
        ["plate", "sink"],
        ["put-in"],
        ["9", "8"],
        "5",
    )
    assert run(classes, tagged("put/VERB", "plate/NOUN", "on/ADP", "sink/NOUN"))[3] == "1"
    # "and" between nouns does not end the clause; "of" inside the object is no particle
    words = tagged("put/VERB", "plate/NOUN", "and/CCONJ", "knife/NOUN", "in/ADP", "sink/NOUN")
    assert run(classes, words)[1] == ["put-in"]
    words = tagged("put/VERB", "spoons/NOUN/spoon", "of/ADP", "sugar/NOUN", "into/ADP", "sink/NOUN")
    assert run(classes, words)[1] == ["put-into"]
    words = tagged("put/VERB", "plate/NOUN", "in/ADP", "sink/NOUN")
    assert run(classes, words, replace(ClassRules(), particles=False))[3] == "1"


def test_of_phrase_takes_the_class_of_the_whole(classes):
    assert classes.partitive_heads("en") == {"top"}
    nouns, _, noun_classes, _ = run(
        classes, tagged("wipe/VERB", "top/NOUN", "of/ADP", "mixture/NOUN")
    )
    assert (nouns, noun_classes) == (["top:mixture"], ["11"])
    # an unknown part-of compound backs off to the whole, not to the part
    assert classes.classes("noun", "en", ["top:pan:old"]) == ["12"]
    rules = replace(ClassRules(), of_phrases=False)
    words = tagged("wipe/VERB", "top/NOUN", "of/ADP", "mixture/NOUN")
    assert run(classes, words, rules)[2] == ["42", "11"]


def test_lemmas_from_the_class_map_and_the_vocabulary(classes):
    assert run(classes, tagged("take/VERB", "knives/NOUN/knive"))[2] == ["4"]
    assert inflection_stems("knives")[:3] == ["knives", "knif", "knife"]
    assert "sneeze" in inflection_stems("sneezing") and "plan" in inflection_stems("planning")
    words = tagged("person/NOUN", "sneezes/VERB/sneez")
    vocabulary = corpus_vocabulary([tagged("sneeze/VERB")] + [words], "en")
    assert [w.lemma for w in word_lemmas(words, "en", vocabulary)] == ["person", "sneeze"]
    # no evidence that another form is a word: the tagger's lemma stays
    assert word_lemmas(words, "en", corpus_vocabulary([words], "en"))[1].lemma == "sneez"
    assert word_lemmas(words, "en", frozenset()) == words  # no vocabulary: no fallback


def test_subject_verb(classes):
    words = tagged("a/DET", "person/NOUN", "opens/ADP", "the/DET", "door/NOUN")
    nouns, verbs, _, _ = run(ClassMap(), words)
    assert (nouns, verbs) == (["person", "door"], ["open"])
    rules = replace(ClassRules(), subject_verb=False)
    assert run(ClassMap(), words, rules)[1] == []


def test_known_verb_first():
    assert main_verb_class(["verb:en:continue", "2"]) == "2"
    assert main_verb_class(["verb:en:continue", "2"], ClassRules.none()) == "verb:en:continue"
    assert main_verb_class([]) is None


def test_hindi_light_verb_stays_one_verb():
    classes = ClassMap()
    classes.add("verb", "hi", "साफ", "v:clean", "test")
    classes.add("verb", "hi", "साफ+कर", "v:clean", "test")
    words = [
        TaggedWord("बर्तन", "बर्तन", "NOUN"),
        TaggedWord("साफ", "साफ", "ADJ"),
        TaggedWord("करें", "करना", "VERB"),
    ]
    nouns, verbs, _, verb_classes = extract_classes(words, "hi", classes)
    assert (nouns, verbs, verb_classes) == (["बर्तन"], ["साफ+कर"], ["v:clean"])
