"""Supported languages (ISO 639-1), script detection and language identification.

:data:`SUPPORTED` are the caption languages of a dataset. :func:`identify_language` names
more: every language of :data:`SCRIPT_LANGUAGES`, which a sentence encoder such as
multilingual-e5 can read without training captions. It finds the dominant script of a text
and, where several languages share it, tells them apart: Hindi and Marathi (Devanagari) by
their words with a multinomial naive Bayes model over words and character n-grams
(``hi_mr_ngrams.tsv``, written by ``scripts/language_ngrams.py``); Bengali and Assamese,
and Urdu, Arabic and Persian, by the letters only one of them uses (:data:`MARKER_LETTERS`).
"""

from __future__ import annotations

import functools
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from rudder.errors import RudderError

SUPPORTED = ("mr", "hi", "ta", "te", "en")
NAMES = {"mr": "Marathi", "hi": "Hindi", "ta": "Tamil", "te": "Telugu", "en": "English",
         "bn": "Bengali", "as": "Assamese", "pa": "Punjabi", "gu": "Gujarati", "or": "Odia",
         "kn": "Kannada", "ml": "Malayalam", "ur": "Urdu", "ar": "Arabic", "fa": "Persian",
         "si": "Sinhala", "th": "Thai", "lo": "Lao", "km": "Khmer", "my": "Burmese",
         "el": "Greek", "ka": "Georgian", "hy": "Armenian", "he": "Hebrew", "am": "Amharic",
         "ko": "Korean", "zh": "Chinese", "ja": "Japanese"}
# The languages identify_language names in each script (Unicode script names, title case),
# the most used first. Latin reads as English (romanised Hindi too); scripts of many
# languages that letters alone do not tell apart (Cyrillic) are not listed.
SCRIPT_LANGUAGES = {
    "Devanagari": ("hi", "mr"),
    "Tamil": ("ta",),
    "Telugu": ("te",),
    "Latin": ("en",),
    "Bengali": ("bn", "as"),
    "Gurmukhi": ("pa",),
    "Gujarati": ("gu",),
    "Oriya": ("or",),
    "Kannada": ("kn",),
    "Malayalam": ("ml",),
    "Arabic": ("ur", "ar", "fa"),
    "Sinhala": ("si",),
    "Thai": ("th",),
    "Lao": ("lo",),
    "Khmer": ("km",),
    "Myanmar": ("my",),
    "Greek": ("el",),
    "Georgian": ("ka",),
    "Armenian": ("hy",),
    "Hebrew": ("he",),
    "Ethiopic": ("am",),
    "Hangul": ("ko",),
    "Han": ("zh",),
    "Hiragana": ("ja",),
    "Katakana": ("ja",),
}
# Letters that, within their script, only one of its languages uses (the orthographies'
# alphabets as Unicode encodes them): Bengali RA and Assamese RA / WA; the Urdu retroflexes,
# noon ghunna, heh doachashmee / goal and yeh barree; Arabic teh marbuta, alef maksura, kaf
# and yeh (Urdu and Persian write keheh and Farsi yeh); Persian peh, tcheh, jeh, gaf, keheh
# and Farsi yeh, which Urdu shares (so they count for Persian only without an Urdu letter).
MARKER_LETTERS = {
    "bn": "\u09b0",
    "as": "\u09f0\u09f1",
    "ur": "\u0679\u0688\u0691\u06ba\u06be\u06c1\u06c2\u06d2\u06d3",
    "ar": "\u0629\u0649\u0643\u064a",
    "fa": "\u067e\u0686\u0698\u06af\u06a9\u06cc",
}
# Japanese text mixes Han with kana: any kana letter makes a Han text Japanese.
_KANA = ("Hiragana", "Katakana")
NGRAM_FILE = Path(__file__).resolve().parent / "data" / "hi_mr_ngrams.tsv"
MAX_NGRAM = 4

# Unicode blocks of the scripts the supported languages are written in.
_SCRIPT_RANGES = {
    "devanagari": (0x0900, 0x097F),
    "tamil": (0x0B80, 0x0BFF),
    "telugu": (0x0C00, 0x0C7F),
}
# First words of Unicode character names that are not the script's name.
_NAME_ALIASES = {"CJK": "Han", "VEDIC": "Devanagari", "HANGUL": "Hangul",
                 "KATAKANA-HIRAGANA": "Katakana"}
_JOINERS = {"\u200c", "\u200d"}  # zero-width (non-)joiners, inside Indic words


class UnsupportedLanguageError(RudderError):
    """A language code outside :data:`SUPPORTED`."""


def language_name(code: str) -> str:
    """The English name of a language code ("bn" -> "Bengali"; an unnamed code as given)."""
    return NAMES.get(code, code)


@dataclass(frozen=True)
class LanguageGuess:
    """What :func:`identify_language` found.

    ``lang`` is None when the text has no letters (emoji, punctuation, digits) or its script
    is not in :data:`SCRIPT_LANGUAGES` (``script`` then says which, e.g. "Cyrillic");
    ``candidates`` are the supported languages of the script with their probabilities, best
    first, and ``confidence`` is the first one's (0.0 when ``lang`` is None).
    """

    lang: str | None
    confidence: float
    script: str | None
    candidates: tuple[tuple[str, float], ...]


def check_language(code: str, where: str | None = None) -> str:
    """Return ``code`` if supported, else raise an error listing the supported codes."""
    if code in SUPPORTED:
        return code
    place = f" in {where}" if where else ""
    raise UnsupportedLanguageError(
        f"unsupported language {code!r}{place}; supported codes: {', '.join(SUPPORTED)}"
    )


def check_query_language(code: str, where: str | None = None) -> str:
    """Return ``code`` if it is a language :func:`identify_language` can name (a query may be
    in one without training captions), else raise an error listing the supported codes."""
    if code in NAMES:
        return code
    return check_language(code, where)


def check_languages(codes, where: str | None = None) -> list[str]:
    """Validate a list of language codes (see :func:`check_language`)."""
    return [check_language(code, where) for code in codes]


def script_of(text: str) -> str:
    """The dominant script of ``text``: 'devanagari', 'tamil', 'telugu' or 'latin'."""
    counts = dict.fromkeys(_SCRIPT_RANGES, 0)
    for char in text:
        point = ord(char)
        for script, (low, high) in _SCRIPT_RANGES.items():
            if low <= point <= high:
                counts[script] += 1
    best = max(counts, key=counts.__getitem__)
    return best if counts[best] > 0 else "latin"


@functools.lru_cache(maxsize=4096)
def char_script(char: str) -> str | None:
    """The Unicode script of a letter or combining mark ("Devanagari", "Latin", "Han", ...)
    from its character name; None for anything else (digits, punctuation, spaces, emoji) and
    for marks shared by all scripts ("COMBINING ...")."""
    if unicodedata.category(char)[0] not in "LM":
        return None
    words = unicodedata.name(char, "").split()
    if not words or words[0] in ("COMBINING", "MODIFIER"):
        return None
    if words[0] in ("FULLWIDTH", "HALFWIDTH") and len(words) > 1:
        words = words[1:]
    return _NAME_ALIASES.get(words[0], words[0].title())


def dominant_script(text: str) -> tuple[str | None, float]:
    """``(script, share)``: the script most of the letters of ``text`` are in (ties go to
    the first one met) and its share of them; ``(None, 0.0)`` when there are no letters."""
    counts: dict[str, int] = {}
    for char in text:
        script = char_script(char)
        if script is not None:
            counts[script] = counts.get(script, 0) + 1
    if not counts:
        return None, 0.0
    best = max(counts, key=counts.__getitem__)
    return best, counts[best] / sum(counts.values())


def words_in_script(text: str, script: str) -> list[str]:
    """The words of ``text`` (NFC, lower case) written in ``script``: maximal runs of letters,
    marks and zero-width joiners that hold at least one letter of that script."""
    words, current = [], []
    for char in unicodedata.normalize("NFC", text).lower() + " ":
        if unicodedata.category(char)[0] in "LM" or char in _JOINERS:
            current.append(char)
            continue
        if current:
            word = "".join(current)
            if any(char_script(c) == script for c in word):
                words.append(word)
            current = []
    return words


def word_features(word: str) -> list[str]:
    """The naive Bayes features of one word: the word itself (as ``=word``) and the character
    n-grams (n = 1..:data:`MAX_NGRAM`) of ``<word>``, where ``<`` and ``>`` mark its ends."""
    padded = f"<{word}>"
    grams = [
        padded[start : start + n]
        for n in range(1, MAX_NGRAM + 1)
        for start in range(len(padded) - n + 1)
    ]
    return [f"={word}", *(g for g in grams if g not in ("<", ">"))]


@dataclass(frozen=True)
class NgramModel:
    """Multinomial naive Bayes over word and character n-gram features (Cavnar & Trenkle
    1994, "N-gram-based text categorization"; the multinomial event model of McCallum &
    Nigam 1998, "A comparison of event models for naive Bayes text classification").

    ``log_prob[f][k]`` is log P(f | ``langs[k]``) with Lidstone smoothing,
    (count + alpha) / (total + alpha * V) over the V features kept; features outside the
    model are skipped. Priors are uniform. Posteriors divide the log-likelihoods by
    ``temperature`` (temperature scaling, Guo et al. 2017, "On calibration of modern neural
    networks"), fitted on held-out text because the features of one word are far from
    independent and plain naive Bayes posteriors are overconfident.
    """

    langs: tuple[str, ...]
    log_prob: dict
    temperature: float

    def log_likelihoods(self, words) -> list[float]:
        """Sum over the features of ``words`` of log P(feature | language), per language."""
        totals = [0.0] * len(self.langs)
        for word in words:
            for feature in word_features(word):
                row = self.log_prob.get(feature)
                if row is not None:
                    for k, value in enumerate(row):
                        totals[k] += value
        return totals

    def posteriors(self, words) -> list[float]:
        """P(language | words) under uniform priors, after temperature scaling (softmax)."""
        scaled = [value / self.temperature for value in self.log_likelihoods(words)]
        top = max(scaled)
        exps = [math.exp(value - top) for value in scaled]
        return [value / sum(exps) for value in exps]


def parse_ngram_file(text: str) -> NgramModel:
    """Read the model file: ``# key<TAB>value`` header lines (langs, alpha, temperature,
    totals), then ``feature<TAB>count...`` rows, one count per language."""
    header, rows = {}, []
    for line in text.splitlines():
        if line.startswith("#"):
            key, _, value = line[1:].strip().partition("\t")
            header[key] = value
        elif line:
            rows.append(line.split("\t"))
    langs = tuple(header["langs"].split(","))
    alpha = float(header["alpha"])
    counts = [[int(v) for v in row[1:]] for row in rows]
    totals = [sum(column) for column in zip(*counts, strict=False)]
    vocab = len(rows)
    log_prob = {
        row[0]: tuple(
            math.log((count[k] + alpha) / (totals[k] + alpha * vocab)) for k in range(len(langs))
        )
        for row, count in zip(rows, counts, strict=True)
    }
    return NgramModel(langs, log_prob, float(header["temperature"]))


@functools.lru_cache(maxsize=1)
def devanagari_model() -> NgramModel:
    """The shipped Hindi/Marathi model (read once)."""
    return parse_ngram_file(NGRAM_FILE.read_text(encoding="utf-8"))


def marker_posteriors(text: str, langs) -> list[float]:
    """Per language of ``langs``, its share of the letters of ``text`` that only one of
    ``langs`` uses (:data:`MARKER_LETTERS`), with add-one-half (Jeffreys) smoothing, so a
    text with no marker gets the uniform ``1 / len(langs)``. Persian's letters count only
    when no Urdu letter is present (Urdu writes them too)."""
    counts = {lang: sum(text.count(letter) for letter in MARKER_LETTERS.get(lang, ""))
              for lang in langs}
    if counts.get("ur") and "fa" in counts:
        counts["fa"] = 0
    total = sum(counts.values()) + 0.5 * len(langs)
    return [(counts[lang] + 0.5) / total for lang in langs]


def identify_language(text: str) -> LanguageGuess:
    """Identify the language of ``text`` from its script and its words or letters.

    The dominant script (the one most letters are in) picks the candidate languages
    (:data:`SCRIPT_LANGUAGES`); Han text with any kana is Japanese. A script with one
    language gives it with confidence 1.0 (so romanised Hindi reads as English). Devanagari
    words go through :func:`devanagari_model` (text without any word the model knows gets
    its uniform prior, 0.5 each, Hindi first); the other shared scripts go through
    :func:`marker_posteriors` (ties: the language listed first).
    """
    script, _share = dominant_script(text)
    if script == "Han" and any(char_script(char) in _KANA for char in text):
        script = "Hiragana"
    if script is None or script not in SCRIPT_LANGUAGES:
        return LanguageGuess(None, 0.0, script, ())
    langs = SCRIPT_LANGUAGES[script]
    if len(langs) == 1:
        return LanguageGuess(langs[0], 1.0, script, ((langs[0], 1.0),))
    if script != "Devanagari":
        probs = marker_posteriors(unicodedata.normalize("NFC", text), langs)
        ranked = sorted(zip(langs, probs, strict=True), key=lambda pair: -pair[1])
        candidates = tuple((lang, round(prob, 4)) for lang, prob in ranked)
        return LanguageGuess(candidates[0][0], candidates[0][1], script, candidates)
    model = devanagari_model()
    probs = model.posteriors(words_in_script(text, script))
    ranked = sorted(zip(model.langs, probs, strict=True), key=lambda pair: -pair[1])
    candidates = tuple((lang, round(prob, 4)) for lang, prob in ranked)
    return LanguageGuess(candidates[0][0], candidates[0][1], script, candidates)


def detect_language(text: str) -> str:
    """The language :func:`identify_language` finds, or "en" when it finds none."""
    return identify_language(text).lang or "en"
