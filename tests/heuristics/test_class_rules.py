"""Class-map rules on hand-tagged captions (the tagger errors of short imperatives): English with
EPIC-like classes, then Marathi, Hindi, Tamil and Telugu with a lexicon (heuristics.indic_rules,
light verbs), tagged with the errors the small UD taggers make."""

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
from heuristics.classes import ClassMap, read_lexicon
from heuristics.indic_rules import clause_final, inflected_lemma, instance_matches
from heuristics.nouns_verbs import TaggedWord, extract, normalise

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


def test_the_clause_starts_after_leading_adverbs_interjections_and_pronouns(classes):
    # "now wash knife", "I wash knife": the tagger calls the verb ADV/NOUN after the extra word
    assert run(classes, tagged("now/ADV", "wash/ADV", "knife/ADV"))[:2] == (["knife"], ["wash"])
    assert run(classes, tagged("I/PRON", "wash/NOUN", "knife/NOUN"))[:2] == (["knife"], ["wash"])
    assert run(classes, tagged("please/INTJ", "soap/NOUN", "knife/NOUN"))[1] == ["soap"]
    # a leading word that is an instance is the clause's first word itself
    assert run(classes, tagged("soap/ADV", "knife/NOUN"))[1] == ["soap"]


def test_a_noun_and_verb_instance_after_the_verb_is_its_object(classes):
    # soap is both; tagged ADV after "take" (or after "put down") it is the object
    assert run(classes, tagged("take/VERB", "soap/ADV"))[:2] == (["soap"], ["take"])
    assert run(classes, tagged("put/VERB", "down/ADV", "soap/ADV"))[:2] == (["soap"], ["put-down"])
    # a second object, after the first and a preposition
    assert run(classes, tagged("put/VERB", "knife/NOUN", "in/ADP", "soap/ADV"))[:2] == (
        ["knife", "soap"], ["put-in"])


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


INDIC_LEXICON = [
    ("noun", "mr", "कागद", "n:paper"),
    ("noun", "mr", "कागदी कप", "n:paper_cup"),
    ("noun", "mr", "तार", "n:wire"),
    ("noun", "mr", "कापड", "n:cloth"),
    ("verb", "mr", "कापणे", "v:cut"),
    ("verb", "mr", "मोजणे", "v:measure"),
    ("verb", "mr", "पाडणे", "v:pierce"),
    ("verb", "mr", "काळजी+घे", "v:care"),
    ("noun", "hi", "कागज़", "n:paper"),
    ("noun", "hi", "कागज़ का कप", "n:paper_cup"),
    ("verb", "hi", "नापना", "v:measure"),
    ("verb", "hi", "काटना", "v:cut"),
    ("verb", "hi", "रंगना", "v:paint"),
    ("verb", "hi", "ध्यान+दे", "v:attend"),
    ("noun", "ta", "நூல்", "n:thread"),
    ("noun", "ta", "ஐஸ்கிரீம் குச்சி", "n:ice_cream_stick"),
    ("verb", "ta", "கட்டு", "v:tie"),
    ("verb", "ta", "சுத்தம்+செய்", "v:clean"),
    ("noun", "te", "కాగితం", "n:paper"),
    ("noun", "te", "వెదురు పుల్ల", "n:bamboo_skewer"),
    ("verb", "te", "కత్తిరించు", "v:cut"),
    ("verb", "te", "తయారు+చేయు", "v:make"),
]


@pytest.fixture(scope="module")
def indic_classes():
    out = ClassMap()
    for pos, lang, lemma, concept in INDIC_LEXICON:
        out.add(pos, lang, lemma, concept, "test")
    return out


def run_indic(indic_classes, words, lang, rules=None, vocabulary=None):
    rules = rules or ClassRules()
    return extract_classes(words, lang, indic_classes, rules=rules, vocabulary=vocabulary)


@pytest.mark.parametrize(
    "lang, words, verb_class",
    [
        # tags the small UD taggers give these verbs in the sample's captions
        ("mr", tagged("कागद/NOUN", "मोजा/PRON"), "v:measure"),  # "measure the paper"
        ("hi", tagged("कागज़/NOUN", "को/ADP", "नापिए/NOUN"), "v:measure"),
        ("ta", tagged("நூலைக்/NOUN", "கட்டவும்/AUX"), "v:tie"),  # "tie the thread"
        ("te", tagged("కాగితాన్ని/NOUN", "కత్తిరించండి/ADV"), "v:cut"),  # "cut the paper"
    ],
)
def test_clause_final_verb_instance_is_the_verb(indic_classes, lang, words, verb_class):
    _, verbs, _, verb_classes = run_indic(indic_classes, words, lang)
    assert verb_classes == [verb_class]
    # the instance is the lemma (the class map's instance as lemma fallback)
    assert verbs == [
        normalise(e[2], lang) for e in INDIC_LEXICON if e[3] == verb_class and e[1] == lang
    ]
    assert run_indic(indic_classes, words, lang, replace(ClassRules(), imperative=False))[3] == []


def test_clause_final_before_then(indic_classes):
    # "first measure the paper, then cut the paper": नापिए ends a clause before फिर
    words = tagged(
        "पहले/ADV", "कागज़/NOUN", "को/ADP", "नापिए/NOUN", "फिर/ADV", "कागज़/NOUN", "काटिए/NOUN"
    )
    assert run_indic(indic_classes, words, "hi")[3] == ["v:measure", "v:cut"]
    forms = [w.text for w in words]
    assert [clause_final(forms, i, "hi") for i in range(len(forms))] == [
        False,
        False,
        False,
        True,
        False,
        False,
        True,
    ]


def test_an_ambiguous_inflection_settles_nothing(indic_classes):
    # mr कापड (cloth) is a noun instance, कापणे (cut) a verb one: कापा (cut!) and कापडा
    # inflect both, so only an exact lemma or form decides
    verbs = frozenset(l for (p, c, l) in indic_classes.entries if p == "verb" and c == "mr")
    nouns = frozenset(l for (p, c, l) in indic_classes.entries if p == "noun" and c == "mr")
    assert instance_matches("कापडा", "कापडा", verbs, nouns, "mr") == (None, None)
    assert instance_matches("कापा", "कापा", verbs, nouns, "mr") == (None, None)
    # at the end of a clause the verb reading wins: "तार कापा" (cut the wire)
    assert instance_matches("कापा", "कापा", verbs, nouns, "mr", final=True) == ("कापणे", None)
    # elsewhere the tagger decides: कापडा tagged NOUN is cloth
    assert instance_matches("कापडा", "कापडा", verbs, nouns, "mr", upos="NOUN") == (None, "कापड")
    assert run_indic(indic_classes, tagged("तार/PRON", "कापा/PRON"), "mr")[3] == ["v:cut"]
    assert instance_matches("कापणे", "कापा", verbs, nouns, "mr") == ("कापणे", None)
    assert instance_matches("कापड", "कापड", verbs, nouns, "mr") == (None, "कापड")
    assert instance_matches("मोजा", "मोजा", verbs, nouns, "mr") == ("मोजणे", None)


@pytest.mark.parametrize(
    "lang, words, noun_classes",
    [
        # "pierce a hole in the paper cup": कपला tagged PRON, कागदी alone would be paper
        ("mr", tagged("कागदी/NOUN", "कपला/PRON", "भोक/NOUN", "पाडा/VERB/पाडणे"), ["n:paper_cup"]),
        (
            "hi",
            tagged("कागज़/NOUN", "के/ADP", "कप/NOUN", "को/ADP", "रंगिए/VERB/रंगना"),
            ["n:paper_cup"],
        ),
        ("ta", tagged("ஐஸ்கிரீம்/PROPN", "குச்சியில்/NOUN", "கட்டவும்/VERB"), ["n:ice_cream_stick"]),
        ("te", tagged("వెదురు/ADJ", "పుల్లను/NOUN", "కత్తిరించండి/VERB"), ["n:bamboo_skewer"]),
    ],
)
def test_multiword_lexicon_nouns(indic_classes, lang, words, noun_classes):
    assert [
        c for c in run_indic(indic_classes, words, lang)[2] if c.startswith("n:")
    ] == noun_classes
    old = run_indic(indic_classes, words, lang, replace(ClassRules(), noun_phrases=False))[2]
    assert [c for c in old if c.startswith("n:")] != noun_classes


def test_a_noun_phrase_never_covers_a_verb_instance(indic_classes):
    # "cut the paper": कागद कापा must not read as कागदी कप (paper cup)
    _, _, noun_classes, verb_classes = run_indic(
        indic_classes, tagged("कागद/NOUN", "कापा/VERB/कापणे"), "mr"
    )
    assert (noun_classes, verb_classes) == (["n:paper"], ["v:cut"])


def test_a_lexicon_noun_tagged_pron_is_a_noun(indic_classes):
    # "cut the wire": तार (wire) tagged PRON by the small Marathi tagger
    assert run_indic(indic_classes, tagged("तार/PRON", "कापा/VERB/कापणे"), "mr")[2] == ["n:wire"]


@pytest.mark.parametrize(
    "lang, words, vocabulary, lemmas",
    [
        # the lemmatizer's inventions (UD dev files) -> a treebank lemma the form inflects
        ("mr", tagged("गावातील/NOUN/गावात"), {"गाव"}, ["गाव"]),
        ("ta", tagged("நாடுகளும்/NOUN/நாடுகளு"), {"நாடு"}, ["நாடு"]),
        ("hi", tagged("छोड़कर/VERB/छोड़क"), {"छोड़ना"}, ["छोड़ना"]),
        # no candidate: the surface form; a lemma equal to its form is a word and stays
        ("mr", tagged("पाचपन्नास/NOUN/पाचपन", "मंदिरात/NOUN"), {"गाव"}, ["पाचपन्नास", "मंदिरात"]),
        # a known lemma stays even when the form inflects another
        ("hi", tagged("घंटे/NOUN/घंटा"), {"घंटा", "घंटी"}, ["घंटा"]),
    ],
)
def test_indic_lemma_that_is_not_a_word(lang, words, vocabulary, lemmas):
    vocabulary = frozenset(normalise(v, lang) for v in vocabulary)
    assert [w.lemma for w in word_lemmas(words, lang, vocabulary)] == [
        normalise(x, lang) for x in lemmas
    ]


def test_indic_lemma_fallback_prefers_the_class_map_instance(indic_classes):
    # "मोजा" lemmatised to the invented "मोजे": the instance मोजणे, not the form
    words = tagged("मोजा/VERB/मोजे")
    assert word_lemmas(words, "mr", frozenset({"कागद"}), indic_classes)[0].lemma == "मोजणे"
    assert (
        word_lemmas(words, "mr", frozenset(), indic_classes) == words
    )  # no vocabulary: no fallback


@pytest.mark.parametrize(
    "lang, words, verb",
    [
        ("hi", tagged("ध्यान/NOUN", "दीजिए/VERB/देना"), "ध्यान+दे"),  # pay attention
        ("mr", tagged("काळजी/NOUN", "घ्या/VERB/घेणे"), "काळजी+घे"),  # take care
        ("ta", tagged("சுத்தம்/NOUN", "செய்யவும்/VERB/செய்"), "சுத்தம்+செய்"),  # clean
        ("te", tagged("తయారు/NOUN", "చేయడానికి/VERB"), "తయారు+చేయు"),  # to make (no lemmatizer)
    ],
)
def test_light_verbs_the_class_map_lists_stay_one_verb(indic_classes, lang, words, verb):
    nouns, verbs, _, verb_classes = run_indic(indic_classes, words, lang)
    assert (nouns, verbs) == ([], [normalise(verb, lang)])
    assert len(verb_classes) == 1 and verb_classes[0].startswith("v:")
    # without a class map listing it, the light verb is a full verb and the host a noun
    nouns, verbs = extract(words, lang)
    assert nouns == [normalise(words[0].lemma, lang)] and len(verbs) == 1 and "+" not in verbs[0]


def test_a_light_verb_with_an_unlisted_host_is_a_full_verb(indic_classes):
    # "give water": पानी दीजिए is no light-verb construction
    nouns, verbs, _, _ = run_indic(indic_classes, tagged("पानी/NOUN", "दीजिए/VERB/देना"), "hi")
    assert (nouns, verbs) == (["पानी"], ["देना"])
    # and a lexicon noun before an unlisted light verb is still retagged: "take the paper"
    nouns, verbs, noun_classes, _ = run_indic(
        indic_classes, tagged("कागज़/ADV", "लीजिए/VERB/लेना"), "hi"
    )
    assert (noun_classes, verbs) == (["n:paper"], ["लेना"])


def test_lexicon_verbs_ending_in_a_light_verb_are_entered_joined(tmp_path):
    path = tmp_path / "lexicon.tsv"
    path.write_text(
        "concept_id\tpos\tlang\tlemma\n"
        "v:clean\tverb\thi\tसाफ करना\n"
        "v:make\tverb\tte\tతయారు చేయు\n"
        "v:care\tverb\tmr\tकाळजी घेणे\n"
        "v:clean\tverb\tta\tசுத்தம் செய்\n"
        "n:ice_cream_stick\tnoun\tmr\tआइस्क्रीमची काडी\n",
        encoding="utf-8",
    )
    lexicon = read_lexicon(path)
    assert lexicon.lookup("verb", "hi", "साफ+कर") == "v:clean"
    assert lexicon.lookup("verb", "te", "తయారు+చేయు") == "v:make"
    assert lexicon.lookup("verb", "mr", normalise("काळजी+घे", "mr")) == "v:care"
    assert lexicon.lookup("verb", "ta", normalise("சுத்தம்+செய்", "ta")) == "v:clean"
    assert len(lexicon) == 9  # five lemmas, four joined forms, no joined noun


def test_inflected_lemma_takes_the_longest():
    lemmas = frozenset({"गाव", "गावकरी"})
    assert inflected_lemma("गावकरीच", lemmas, "mr") == "गावकरी"
    assert inflected_lemma("गावात", lemmas, "mr") == "गाव"  # गावकरी needs 4 shared code points
    assert inflected_lemma("नदी", lemmas, "mr") is None
