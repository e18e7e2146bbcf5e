"""Language-aware word tokenisation.

Indic languages (mr, hi, ta, te) go through indic-nlp-library (Kunchukuttan, 2020): the
script normaliser of ``IndicNormalizerFactory`` (canonical Unicode forms, nukta and
chandrabindu variants, danda forms) and then ``trivial_tokenize``, which splits on
whitespace and punctuation. Neither needs the Indic NLP *resources* folder
(``INDIC_RESOURCES_PATH``), so nothing has to be downloaded. English is lower-cased and
split into word tokens by a regular expression. In every language, tokens made only of
punctuation or symbols (``.``, ``,``, ``।``, ``-``) are dropped; digits are kept.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from rudder.languages import check_language

INDIC = ("mr", "hi", "ta", "te")
# A word: letters/digits (Unicode-aware), optionally joined by an apostrophe ("don't").
_ENGLISH_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


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

    ``lang`` must be one of :data:`rudder.languages.SUPPORTED`; anything else raises
    :class:`rudder.languages.UnsupportedLanguageError`.
    """
    check_language(lang, "rudder.text.tokenize")
    if not isinstance(text, str):
        raise TypeError(f"rudder.text.tokenize: expected a str, got {type(text).__name__}")
    if lang == "en":
        return _ENGLISH_WORD.findall(unicodedata.normalize("NFC", text).lower())
    from indicnlp.tokenize.indic_tokenize import trivial_tokenize

    normalized = _normalizer(lang).normalize(text)
    return [token for token in trivial_tokenize(normalized, lang) if _is_word(token)]


def tokenize_batch(texts, langs) -> list[list[str]]:
    """Tokenise ``texts[i]`` in ``langs[i]``; ``langs`` may also be one code for all texts."""
    texts = list(texts)
    langs = [langs] * len(texts) if isinstance(langs, str) else list(langs)
    if len(langs) != len(texts):
        raise ValueError(f"tokenize_batch: {len(texts)} texts but {len(langs)} languages")
    return [tokenize(text, lang) for text, lang in zip(texts, langs)]
