"""Class maps: noun and verb lemmas -> language-independent concept ids.

Two file formats load into a :class:`ClassMap`:

- the EPIC-KITCHENS-100 class CSV (``EPIC_100_noun_classes.csv``,
  ``EPIC_100_verb_classes.csv``): header ``id,key,instances[,more columns]``, ``instances``
  a Python-style list of strings (``"['tap', 'tap:water']"``); every instance and the key
  map to ``id``. Its lemmas are English.
- the multilingual lexicon TSV (``rudder/data/sample_lexicon.tsv``): header
  ``concept_id<TAB>pos<TAB>lang<TAB>lemma`` with ``pos`` in {noun, verb}; lemmas of several
  languages share a concept id, so relevance compares captions across languages. An
  English multiword noun (``bamboo skewer``) is also entered in the compound form the
  extraction produces (``skewer:bamboo``).

Lookup (:meth:`ClassMap.classes`) backs off from a joined lemma to its base: a compound
noun ``lid:frying:pan`` tries ``lid:frying:pan``, ``lid:pan``, ``lid`` (dropping the
modifier farthest from the head first); a phrasal verb ``turn-on`` tries ``turn-on``,
``turn``; an English compound none of those forms names falls back to its modifiers,
nearest the head first (a tagger that joins a trailing adverb to the object: ``again:door``
-> ``door``); a light-verb construction ``साफ+कर`` is looked up whole. A lexicon verb of several
words ending in a light verb (``साफ करना``, ``తయారు చేయు``) is also entered in the joined
form the extraction produces (``साफ+कर``, ``తయారు+చేయు``). A lemma none of whose
forms is known gets a singleton class ``<pos>:<lang>:<base>`` of its own.
"""

from __future__ import annotations

import ast
import csv
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rudder.languages import check_language

from .nouns_verbs import LIGHT_VERBS, light_stem, normalise
from .text_files import open_text

POS = ("noun", "verb")


class ClassFileError(ValueError):
    """A malformed class CSV or lexicon TSV; the message names the file and line."""


@dataclass
class ClassMap:
    """``(pos, lang, lemma) -> concept id``, remembering where each entry came from."""

    entries: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    _partitive_key: tuple = field(default=(), repr=False, compare=False)
    _partitive: frozenset = field(default=frozenset(), repr=False, compare=False)

    def add(self, pos: str, lang: str, lemma: str, concept: str, source: str) -> None:
        key = (pos, lang, normalise(lemma, lang))
        old = self.entries.get(key)
        if old is not None and old != concept:
            raise ClassFileError(
                f"{source}: {pos} {lemma!r} ({lang}) maps to class {concept!r}, but "
                f"{self.sources[key]} maps it to {old!r}; keep one"
            )
        self.entries[key] = concept
        self.sources.setdefault(key, source)

    def update(self, other: ClassMap) -> ClassMap:
        for key, concept in other.entries.items():
            pos, lang, lemma = key
            self.add(pos, lang, lemma, concept, other.sources[key])
        return self

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, pos: str, lang: str, lemma: str) -> str | None:
        """The concept id of one exact lemma, or None."""
        return self.entries.get((pos, lang, lemma))

    def partitive_heads(self, lang: str) -> frozenset:
        """Nouns ``h`` with at least 3 instances ``h:m``, most of them in another class than
        ``h`` (EPIC's ``top:plate`` is a plate, ``piece:onion`` an onion): parts of a whole."""
        key = (lang, len(self.entries))
        if self._partitive_key != key:
            own: dict[str, Any] = {}
            votes: dict[str, Any] = {}
            for (pos, code, lemma), concept in self.entries.items():
                if pos == "noun" and code == lang:
                    if ":" in lemma:
                        votes.setdefault(lemma.split(":", 1)[0], []).append(concept)
                    else:
                        own[lemma] = concept
            self._partitive = frozenset(
                head
                for head, concepts in votes.items()
                if len(concepts) >= 3
                and sum(c != own.get(head) for c in concepts) > len(concepts) / 2
            )
            self._partitive_key = key
        return self._partitive

    def classes(self, pos: str, lang: str, lemmas) -> list[str]:
        """Concept ids of ``lemmas`` (already normalised), in order, each once."""
        if pos not in POS:
            raise ValueError(f"pos must be one of {POS}, got {pos!r}")
        out = []
        for lemma in lemmas:
            forms = _backoff(lemma, pos)
            head, _, rest = lemma.partition(":")
            if pos == "noun" and rest and head in self.partitive_heads(lang):
                forms = [lemma, *_backoff(rest, pos), *forms[1:]]
            # last, an English noun's modifiers, nearest the head first ("open door again"
            # joins again:door)
            last_resort = lemma.split(":")[:0:-1] if (pos, lang) == ("noun", "en") else []
            concept = next(
                (c for c in (self.lookup(pos, lang, f) for f in [*forms, *last_resort])
                 if c is not None),
                None,
            )
            out.append(concept if concept is not None else f"{pos}:{lang}:{forms[-1]}")
        return list(dict.fromkeys(out))


def _backoff(lemma: str, pos: str) -> list[str]:
    """The forms tried for a lemma, most specific first (see the module docstring)."""
    if pos == "noun" and ":" in lemma:
        head, *mods = lemma.split(":")
        return [":".join([head] + mods[k:]) for k in range(len(mods))] + [head]
    if pos == "verb" and "-" in lemma and "+" not in lemma:
        return [lemma, lemma.split("-", 1)[0]]
    return [lemma]


def read_epic_classes(path, pos: str, lang: str = "en") -> ClassMap:
    """Load an EPIC-KITCHENS-100 class CSV (``id,key,instances[,...]``) for ``pos``."""
    path = Path(path)
    if pos not in POS:
        raise ValueError(f"pos must be one of {POS}, got {pos!r}")
    check_language(lang, f"{path}")
    if not path.is_file():
        raise ClassFileError(f"{path}: no such class CSV")
    out = ClassMap()
    rows = []  # (line, id, last cell) of every class row
    with open_text(path, ClassFileError, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:3]] != ["id", "key", "instances"]:
            raise ClassFileError(
                f"{path}:1: expected the header 'id,key,instances[,...]' of an EPIC-KITCHENS-100 "
                f"class CSV, got {header!r}"
            )
        for row in reader:
            line = reader.line_num
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) < 3:
                raise ClassFileError(
                    f"{path}:{line}: expected at least 3 columns (id,key,instances), got {len(row)}"
                )
            concept, key, raw = row[0].strip(), row[1].strip(), row[2]
            if not concept or not key:
                raise ClassFileError(f"{path}:{line}: empty id or key")
            try:
                instances = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                raise ClassFileError(
                    f"{path}:{line}: instances must be a list literal like "
                    f"\"['tap', 'tap:water']\", got {raw[:60]!r}"
                ) from None
            if not isinstance(instances, (list, tuple)) or not all(
                isinstance(i, str) and i.strip() for i in instances
            ):
                raise ClassFileError(
                    f"{path}:{line}: instances must be a list of non-empty strings"
                )
            for lemma in dict.fromkeys([key, *instances]):
                out.add(pos, lang, lemma, concept, f"{path}:{line}")
            rows.append((line, concept, row[-1].strip() if len(row) > 3 else None))
    if not out:
        raise ClassFileError(f"{path}: no classes in the file")
    _check_class_rows(path, rows)
    return out


def _check_class_rows(path: Path, rows) -> None:
    """Refuse a class CSV that is cut short or has gaps: ids repeated, integer ids that are
    not contiguous (EPIC numbers its classes 0..N-1), or a last line with no line end whose
    last cell (EPIC's category) appears on no other row: a line cut mid-row (``head -c``, a
    partial download). EPIC's own files end without a line end, so that alone is no error."""
    ids = [concept for _, concept, _ in rows]
    seen: dict[str, Any] = {}
    for line, concept, _ in rows:
        if concept in seen:
            raise ClassFileError(f"{path}:{line}: class id {concept!r} is also on line "
                                 f"{seen[concept]}; each class has one row")
        seen[concept] = line
    if all(c.lstrip("-").isdigit() for c in ids):
        numbers = sorted(int(c) for c in ids)
        gap = next((a + 1 for a, b in itertools.pairwise(numbers) if b != a + 1), None)
        if gap is not None:
            raise ClassFileError(
                f"{path}: class ids are not contiguous: {gap} is missing between "
                f"{numbers[0]} and {numbers[-1]} (a row was deleted or the file is damaged); "
                "use the complete class file"
            )
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - 1))
        ends_whole = handle.read(1) in (b"\n", b"\r")
    line, _, last = rows[-1]
    others = {cell for _, _, cell in rows[:-1]}
    if not ends_whole and last is not None and len(rows) > 1 and last not in others:
        raise ClassFileError(
            f"{path}:{line}: the last line looks cut mid-row (no line end, and its last cell "
            f"{last!r} is on no other row); the file is truncated: use the complete class file "
            "(or end the line with a newline if it is whole)"
        )


def read_lexicon(path) -> ClassMap:
    """Load a multilingual lexicon TSV ``concept_id<TAB>pos<TAB>lang<TAB>lemma``."""
    path = Path(path)
    if not path.is_file():
        raise ClassFileError(f"{path}: no such lexicon file")
    out = ClassMap()
    with open_text(path, ClassFileError) as handle:
        for line, raw in enumerate(handle, start=1):
            text = raw.rstrip("\n").rstrip("\r")
            if line == 1:
                if text.split("\t") != ["concept_id", "pos", "lang", "lemma"]:
                    raise ClassFileError(
                        f"{path}:1: expected the header "
                        f"'concept_id<TAB>pos<TAB>lang<TAB>lemma', got {text!r}"
                    )
                continue
            if not text.strip():
                continue
            cells = text.split("\t")
            if len(cells) != 4:
                raise ClassFileError(
                    f"{path}:{line}: expected 4 tab-separated columns, got {len(cells)}"
                )
            concept, pos, lang, lemma = (c.strip() for c in cells)
            if pos not in POS:
                raise ClassFileError(f"{path}:{line}: pos must be 'noun' or 'verb', got {pos!r}")
            try:
                check_language(lang)
            except ValueError as error:
                raise ClassFileError(f"{path}:{line}: {error}") from None
            if not concept or not lemma:
                raise ClassFileError(f"{path}:{line}: empty concept_id or lemma")
            out.add(pos, lang, lemma, concept, f"{path}:{line}")
            words = lemma.split()
            if pos == "noun" and lang == "en" and len(words) > 1:
                out.add(pos, lang, ":".join([words[-1], *words[:-1]]), concept, f"{path}:{line}")
            stem = _light_verb(words, lang) if pos == "verb" else None
            if stem is not None:
                out.add(pos, lang, f"{' '.join(words[:-1])}+{stem}", concept, f"{path}:{line}")
    if not out:
        raise ClassFileError(f"{path}: no entries in the lexicon")
    return out


def _light_verb(words, lang: str) -> str | None:
    """The light stem of a multiword verb lemma ending in a light verb (``साफ करना``), or None."""
    if len(words) < 2 or lang not in LIGHT_VERBS:
        return None
    last = normalise(words[-1], lang)
    table = {normalise(k, lang): v for k, v in LIGHT_VERBS[lang].items()}
    return light_stem(last, last, lang, table)


def lexicon_entries(class_map: ClassMap) -> list[tuple[str, str, str]]:
    """``(pos, lang, lemma)`` of every entry (what the lexicon tagger matches)."""
    return sorted(class_map.entries)
