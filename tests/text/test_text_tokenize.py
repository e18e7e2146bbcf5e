"""rudder.text.tokenize: indic-nlp for Indic scripts, regex words for English."""

import pytest

from rudder.languages import UnsupportedLanguageError
from rudder.text import tokenize, tokenize_batch
from rudder.text.tokenize import _normalizer


@pytest.mark.parametrize(
    ("lang", "text", "tokens"),
    [
        ("mr", "बाटली कापा आणि स्ट्रॉ चिकटवा.", ["बाटली", "कापा", "आणि", "स्ट्रॉ", "चिकटवा"]),
        ("hi", "बोतल को काटें, और स्ट्रॉ चिपकाएँ।", ["बोतल", "को", "काटें", "और", "स्ट्रॉ", "चिपकाएँ"]),
        ("ta", "பாட்டிலை வெட்டவும், பிறகு ஒட்டவும்.", ["பாட்டிலை", "வெட்டவும்", "பிறகு", "ஒட்டவும்"]),
        ("te", "సీసాను కత్తిరించండి; తర్వాత అతికించండి!", ["సీసాను", "కత్తిరించండి", "తర్వాత", "అతికించండి"]),
        (
            "en",
            "Fold the Card-sheet in 2 halves... (it's easy)",
            ["fold", "the", "card", "sheet", "in", "2", "halves", "it's", "easy"],
        ),
        ("mr", 'पाणी १२ लिटर — "छान"!', ["पाणी", "१२", "लिटर", "छान"]),
        ("en", " ,.;!? ", []),
    ],
)
def test_tokens(lang, text, tokens):
    assert tokenize(text, lang) == tokens


def test_indic_normaliser_unifies_nukta_forms():
    composed, decomposed = "\u0958लम", "\u0915\u093cलम"  # क़लम as one code point / as क + nukta
    assert tokenize(composed, "hi") == tokenize(decomposed, "hi") == [decomposed]


def test_works_without_indic_resources(monkeypatch):
    import indicnlp.common

    monkeypatch.delenv("INDIC_RESOURCES_PATH", raising=False)
    monkeypatch.setattr(indicnlp.common, "INDIC_RESOURCES_PATH", "")
    _normalizer.cache_clear()
    assert tokenize("घ्या।", "mr") == ["घ्या"]


def test_normaliser_cached_per_language():
    _normalizer.cache_clear()
    tokenize("एक", "mr"), tokenize("दो", "mr"), tokenize("एक", "hi")
    assert _normalizer("mr") is _normalizer("mr") and _normalizer("mr") is not _normalizer("hi")
    assert _normalizer.cache_info().misses == 2


def test_unsupported_language_and_bad_input():
    with pytest.raises(UnsupportedLanguageError, match="supported codes: mr, hi, ta, te, en"):
        tokenize("hola", "es")
    with pytest.raises(TypeError, match="expected a str"):
        tokenize(None, "en")


def test_tokenize_batch():
    assert tokenize_batch(["a b", "घ्या"], ["en", "mr"]) == [["a", "b"], ["घ्या"]]
    assert tokenize_batch(["A", "B"], "en") == [["a"], ["b"]]
    with pytest.raises(ValueError, match="2 texts but 1 languages"):
        tokenize_batch(["a", "b"], ["en"])
