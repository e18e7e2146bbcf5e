"""Language-aware word tokenisation.

Every text is first put in Unicode NFC and lower-cased (Indic scripts have no case; Latin
words in Indic captions, "TV", then match the English ones).

Indic languages (mr, hi, ta, te) go through indic-nlp-library (Kunchukuttan, 2020): the
script normaliser of ``IndicNormalizerFactory`` (its defaults: nukta and two-part vowel
composites, danda forms, ZWJ/ZWNJ removed; chandrabindu is *not* merged with anusvara, so
"चिपकाएँ" and "चिपकाएं" stay two words) and then ``trivial_tokenize``, which splits on
spaces and punctuation. Before that, every run of whitespace (newlines, thin spaces) becomes
one space, as ``trivial_tokenize`` splits on spaces only, and a colon that no letter or digit
follows ("साहित्य: पाणी") is set apart as punctuation: the normaliser reads every colon after
a letter as a visarga typed with the keyboard's colon, which holds inside a word ("दु:ख")
but not for the punctuation colon (a word-final visarga typed as a colon, "स्वत:", is then
read as punctuation too). Neither step needs the Indic NLP *resources* folder
(``INDIC_RESOURCES_PATH``), so nothing has to be downloaded.

English is split into word tokens by a regular expression: letters and digits with their
combining marks (so a Devanagari or accented word stays whole), joined by apostrophes
("don't"; a typographic ’ counts as one). In every language, tokens made only of punctuation
or symbols (``.``, ``,``, ``।``, ``-``) are dropped; digits are kept.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from rudder.languages import check_query_language

INDIC = ("mr", "hi", "ta", "te")


def _combining_marks() -> str:
    """A character class body of the combining marks (Mn, Mc, Me) from U+0300 to U+1FFF:
    Latin diacritics and the marks of the Indic scripts, which ``\\w`` does not match."""
    marks = [c for c in range(0x300, 0x2000) if unicodedata.category(chr(c)).startswith("M")]
    return "".join(re.escape(chr(c)) for c in marks)


_WORD_CHAR = rf"(?:[^\W_]|[{_combining_marks()}])"
# A word: letters/digits with their marks, optionally joined by an apostrophe ("don't").
_ENGLISH_WORD = re.compile(rf"{_WORD_CHAR}+(?:'{_WORD_CHAR}+)*")
_ENGLISH_FOLDING = str.maketrans({"\u200c": None, "\u200d": None, "\u2019": "'"})
# A colon no letter or digit follows: punctuation, not a visarga typed as a colon.
_PUNCTUATION_COLON = re.compile(r":(?![^\W_])")


@cache
def _normalizer(lang: str):
    """The indic-nlp normaliser of ``lang``, built once per language."""
    from indicnlp.normalize.indic_normalize import IndicNormalizerFactory

    return IndicNormalizerFactory().get_normalizer(lang)


def _is_word(token: str) -> bool:
    """True when ``token`` holds a letter, a combining mark or a digit (not only punctuation)."""
    return any(unicodedata.category(char)[0] in "LMN" for char in token)


def tokenize(text: str, lang: str) -> list[str]:
    """Split ``text`` in language ``lang`` into word tokens (punctuation dropped).

    ``lang`` is one of :data:`rudder.languages.SUPPORTED`, or another language that
    :func:`rudder.languages.identify_language` names (a query without training captions: split
    into words as English is, by the regular expression above); anything else raises
    :class:`rudder.languages.UnsupportedLanguageError`.
    """
    check_query_language(lang, "rudder.text.tokenize")
    if not isinstance(text, str):
        raise TypeError(f"rudder.text.tokenize: expected a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text).lower()
    if lang not in INDIC:
        return _ENGLISH_WORD.findall(text.translate(_ENGLISH_FOLDING))
    from indicnlp.tokenize.indic_tokenize import trivial_tokenize

    text = _PUNCTUATION_COLON.sub(" : ", " ".join(text.split()))
    normalized = _normalizer(lang).normalize(text)
    return [token for token in trivial_tokenize(normalized, lang) if _is_word(token)]


def tokenize_batch(texts, langs) -> list[list[str]]:
    """Tokenise ``texts[i]`` in ``langs[i]``; ``langs`` may also be one code for all texts."""
    texts = list(texts)
    langs = [langs] * len(texts) if isinstance(langs, str) else list(langs)
    if len(langs) != len(texts):
        raise ValueError(f"tokenize_batch: {len(texts)} texts but {len(langs)} languages")
    return [tokenize(text, lang) for text, lang in zip(texts, langs, strict=True)]
