import pytest

from heuristics.nouns_verbs import ExtractionOptions, TaggedWord, extract, normalise
from rudder.languages import UnsupportedLanguageError


def words(*triples, heads=None, deprels=None):
    heads = heads or [None] * len(triples)
    deprels = deprels or [None] * len(triples)
    return [TaggedWord(t, l, u, h, d)
            for (t, l, u), h, d in zip(triples, heads, deprels, strict=True)]


def test_nouns_and_verbs_in_order_once_and_aux_is_not_a_verb():
    tagged = words(
        ("Cut", "Cut", "VERB"),
        ("the", "the", "DET"),
        ("Papers", "Paper", "NOUN"),
        ("is", "be", "AUX"),
        ("cut", "cut", "VERB"),
        ("Ravi", "Ravi", "PROPN"),
    )
    assert extract(tagged, "en") == (["paper", "ravi"], ["cut"])


def test_english_phrasal_verb_by_adjacency():
    tagged = words(("pick", "pick", "VERB"), ("up", "up", "ADP"), ("cup", "cup", "NOUN"))
    assert extract(tagged, "en") == (["cup"], ["pick-up"])
    assert extract(tagged, "en", ExtractionOptions(phrasal_verbs=False)) == (["cup"], ["pick"])
    # "into" is a preposition, not a particle
    tagged = words(("pour", "pour", "VERB"), ("into", "into", "ADP"), ("bowl", "bowl", "NOUN"))
    assert extract(tagged, "en") == (["bowl"], ["pour"])


def test_english_phrasal_verb_by_compound_prt_relation():
    # "pick the cup up": the particle is not adjacent but the parser attached it (compound:prt).
    tagged = words(
        ("pick", "pick", "VERB"),
        ("the", "the", "DET"),
        ("cup", "cup", "NOUN"),
        ("up", "up", "ADP"),
        heads=[0, 3, 1, 1],
        deprels=["root", "det", "obj", "compound:prt"],
    )
    assert extract(tagged, "en") == (["cup"], ["pick-up"])


def test_hindi_light_verb_by_adjacency():
    tagged = words(("बर्तन", "बर्तन", "NOUN"), ("साफ", "साफ", "ADJ"), ("करें", "करना", "VERB"))
    assert extract(tagged, "hi") == (["बर्तन"], ["साफ+कर"])
    assert extract(tagged, "hi", ExtractionOptions(light_verbs=False)) == (["बर्तन"], ["करना"])


def test_light_verb_needs_a_light_verb_and_a_verb():
    # काटना is not a light verb; होना as AUX (copula) never joins.
    assert extract(words(("कागज़", "कागज़", "NOUN"), ("काटिए", "काटना", "VERB")), "hi") == (
        ["कागज़"],
        ["काटना"],
    )
    assert extract(words(("पानी", "पानी", "NOUN"), ("है", "होना", "AUX")), "hi") == (["पानी"], [])


def test_marathi_light_verb_by_compound_lvc_relation_with_any_light_verb():
    # उड्या मारत: UD marks उडी compound:lvc on मारणे, which is not in the adjacency list.
    tagged = words(
        ("मुले", "मूल", "NOUN"),
        ("उड्या", "उडी", "NOUN"),
        ("मारत", "मारणे", "VERB"),
        heads=[3, 3, 0],
        deprels=["nsubj", "compound:lvc", "root"],
    )
    assert extract(tagged, "mr") == (["मूल"], ["उडी+मार"])


def test_english_noun_compounds_in_epic_format():
    tagged = words(
        ("turn", "turn", "VERB"),
        ("on", "on", "ADP"),
        ("water", "water", "NOUN"),
        ("tap", "tap", "NOUN"),
    )
    assert extract(tagged, "en") == (["tap:water"], ["turn-on"])
    tagged = words(("frying", "frying", "NOUN"), ("pan", "pan", "NOUN"), ("lid", "lid", "NOUN"))
    assert extract(tagged, "en") == (["lid:frying:pan"], [])
    assert extract(tagged, "en", ExtractionOptions(noun_compounds=())) == (
        ["frying", "pan", "lid"],
        [],
    )
    # no compounds for Hindi by default: adjacent nouns stay apart
    assert extract(words(("राजा", "राजा", "NOUN"), ("रानी", "रानी", "NOUN")), "hi") == (
        ["राजा", "रानी"],
        [],
    )


def test_normalise():
    assert normalise("  Bottle ", "en") == "bottle"
    # indic-nlp canonicalises the nukta: क + ़ is the precomposed क़ (U+0958) or the pair, one form
    assert normalise("क\u093c", "hi") == normalise("\u0958", "hi")
    with pytest.raises(UnsupportedLanguageError, match="supported codes"):
        normalise("x", "fr")
