"""The Indic class-map rules (heuristics.indic_rules, light verbs) on hand-tagged captions in
Marathi, Hindi, Tamil and Telugu: the tags are the errors the small UD taggers make."""

from dataclasses import replace

import pytest

from heuristics.class_rules import ClassRules, extract_classes, word_lemmas
from heuristics.classes import ClassMap, read_lexicon
from heuristics.indic_rules import clause_final, inflected_lemma, instance_matches
from heuristics.nouns_verbs import TaggedWord, extract, normalise

LEXICON = [
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
def classes():
    out = ClassMap()
    for pos, lang, lemma, concept in LEXICON:
        out.add(pos, lang, lemma, concept, "test")
    return out


def tagged(*items):
    """ "word/UPOS" or "word/UPOS/lemma" -> TaggedWord list (lemma = word when absent)."""
    out = []
    for item in items:
        parts = item.split("/")
        out.append(TaggedWord(parts[0], parts[2] if len(parts) > 2 else parts[0], parts[1]))
    return out


def run(classes, words, lang, rules=None, vocabulary=None):
    rules = rules or ClassRules()
    return extract_classes(words, lang, classes, rules=rules, vocabulary=vocabulary)


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
def test_clause_final_verb_instance_is_the_verb(classes, lang, words, verb_class):
    _, verbs, _, verb_classes = run(classes, words, lang)
    assert verb_classes == [verb_class]
    # the instance is the lemma (the class map's instance as lemma fallback)
    assert verbs == [normalise(e[2], lang) for e in LEXICON if e[3] == verb_class and e[1] == lang]
    assert run(classes, words, lang, replace(ClassRules(), imperative=False))[3] == []


def test_clause_final_before_then(classes):
    # "first measure the paper, then cut the paper": नापिए ends a clause before फिर
    words = tagged(
        "पहले/ADV", "कागज़/NOUN", "को/ADP", "नापिए/NOUN", "फिर/ADV", "कागज़/NOUN", "काटिए/NOUN"
    )
    assert run(classes, words, "hi")[3] == ["v:measure", "v:cut"]
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


def test_an_ambiguous_inflection_settles_nothing(classes):
    # mr कापड (cloth) is a noun instance, कापणे (cut) a verb one: कापा (cut!) and कापडा
    # inflect both, so only an exact lemma or form decides
    verbs = frozenset(l for (p, c, l) in classes.entries if p == "verb" and c == "mr")
    nouns = frozenset(l for (p, c, l) in classes.entries if p == "noun" and c == "mr")
    assert instance_matches("कापडा", "कापडा", verbs, nouns, "mr") == (None, None)
    assert instance_matches("कापा", "कापा", verbs, nouns, "mr") == (None, None)
    # at the end of a clause the verb reading wins: "तार कापा" (cut the wire)
    assert instance_matches("कापा", "कापा", verbs, nouns, "mr", final=True) == ("कापणे", None)
    # elsewhere the tagger decides: कापडा tagged NOUN is cloth
    assert instance_matches("कापडा", "कापडा", verbs, nouns, "mr", upos="NOUN") == (None, "कापड")
    assert run(classes, tagged("तार/PRON", "कापा/PRON"), "mr")[3] == ["v:cut"]
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
def test_multiword_lexicon_nouns(classes, lang, words, noun_classes):
    assert [c for c in run(classes, words, lang)[2] if c.startswith("n:")] == noun_classes
    old = run(classes, words, lang, replace(ClassRules(), noun_phrases=False))[2]
    assert [c for c in old if c.startswith("n:")] != noun_classes


def test_a_noun_phrase_never_covers_a_verb_instance(classes):
    # "cut the paper": कागद कापा must not read as कागदी कप (paper cup)
    _, _, noun_classes, verb_classes = run(classes, tagged("कागद/NOUN", "कापा/VERB/कापणे"), "mr")
    assert (noun_classes, verb_classes) == (["n:paper"], ["v:cut"])


def test_a_lexicon_noun_tagged_pron_is_a_noun(classes):
    # "cut the wire": तार (wire) tagged PRON by the small Marathi tagger
    assert run(classes, tagged("तार/PRON", "कापा/VERB/कापणे"), "mr")[2] == ["n:wire"]


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


def test_indic_lemma_fallback_prefers_the_class_map_instance(classes):
    # "मोजा" lemmatised to the invented "मोजे": the instance मोजणे, not the form
    words = tagged("मोजा/VERB/मोजे")
    assert word_lemmas(words, "mr", frozenset({"कागद"}), classes)[0].lemma == "मोजणे"
    assert word_lemmas(words, "mr", frozenset(), classes) == words  # no vocabulary: no fallback


@pytest.mark.parametrize(
    "lang, words, verb",
    [
        ("hi", tagged("ध्यान/NOUN", "दीजिए/VERB/देना"), "ध्यान+दे"),  # pay attention
        ("mr", tagged("काळजी/NOUN", "घ्या/VERB/घेणे"), "काळजी+घे"),  # take care
        ("ta", tagged("சுத்தம்/NOUN", "செய்யவும்/VERB/செய்"), "சுத்தம்+செய்"),  # clean
        ("te", tagged("తయారు/NOUN", "చేయడానికి/VERB"), "తయారు+చేయు"),  # to make (no lemmatizer)
    ],
)
def test_light_verbs_the_class_map_lists_stay_one_verb(classes, lang, words, verb):
    nouns, verbs, _, verb_classes = run(classes, words, lang)
    assert (nouns, verbs) == ([], [normalise(verb, lang)])
    assert len(verb_classes) == 1 and verb_classes[0].startswith("v:")
    # without a class map listing it, the light verb is a full verb and the host a noun
    nouns, verbs = extract(words, lang)
    assert nouns == [normalise(words[0].lemma, lang)] and len(verbs) == 1 and "+" not in verbs[0]


def test_a_light_verb_with_an_unlisted_host_is_a_full_verb(classes):
    # "give water": पानी दीजिए is no light-verb construction
    nouns, verbs, _, _ = run(classes, tagged("पानी/NOUN", "दीजिए/VERB/देना"), "hi")
    assert (nouns, verbs) == (["पानी"], ["देना"])


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
