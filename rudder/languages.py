"""Supported languages (ISO 639-1) and script detection."""

from __future__ import annotations

from rudder.errors import RudderError

SUPPORTED = ("mr", "hi", "ta", "te", "en")
NAMES = {"mr": "Marathi", "hi": "Hindi", "ta": "Tamil", "te": "Telugu", "en": "English"}

# Unicode blocks of the scripts the supported languages are written in.
_SCRIPT_RANGES = {
    "devanagari": (0x0900, 0x097F),
    "tamil": (0x0B80, 0x0BFF),
    "telugu": (0x0C00, 0x0C7F),
}
# Frequent function words that tell Marathi from Hindi (both Devanagari).
_MARATHI_MARKERS = {"आणि", "आहे", "आहेत", "करा", "घ्या", "च्या", "ने", "मध्ये", "वर", "एक", "ला"}
_HINDI_MARKERS = {"और", "है", "हैं", "करें", "लें", "के", "की", "का", "में", "पर", "को", "से"}


class UnsupportedLanguageError(RudderError):
    """A language code outside :data:`SUPPORTED`."""


def check_language(code: str, where: str | None = None) -> str:
    """Return ``code`` if supported, else raise an error listing the supported codes."""
    if code in SUPPORTED:
        return code
    place = f" in {where}" if where else ""
    raise UnsupportedLanguageError(
        f"unsupported language {code!r}{place}; supported codes: {', '.join(SUPPORTED)}"
    )


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
    best = max(counts, key=counts.get)
    return best if counts[best] > 0 else "latin"


def detect_language(text: str) -> str:
    """Guess the language of ``text`` from its script.

    Tamil, Telugu and Latin scripts map to one language each; Devanagari is Marathi
    unless Hindi function words outnumber Marathi ones.
    """
    script = script_of(text)
    if script == "tamil":
        return "ta"
    if script == "telugu":
        return "te"
    if script == "latin":
        return "en"
    words = set(text.split())
    marathi = len(words & _MARATHI_MARKERS) + sum(w.endswith(("च्या", "ची", "चा")) for w in words)
    hindi = len(words & _HINDI_MARKERS)
    return "hi" if hindi > marathi else "mr"
