"""A strict CoNLL-U reader and writer, and the surface-token view the taggers train on.

Format: https://universaldependencies.org/format.html (10 tab-separated columns; word
lines with integer ids 1..n, multiword-token ranges ``a-b`` and empty nodes ``a.b``;
comments start with ``#``; a blank line ends a sentence). Every error names the file and
line and says what the line should look like.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

from rudder.atomic import atomic_write_text

from .text_files import open_text

COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
UPOS_TAGS = frozenset(
    [
        "ADJ",
        "ADP",
        "ADV",
        "AUX",
        "CCONJ",
        "DET",
        "INTJ",
        "NOUN",
        "NUM",
        "PART",
        "PRON",
        "PROPN",
        "PUNCT",
        "SCONJ",
        "SYM",
        "VERB",
        "X",
    ]
)
# UPOS of words that carry content: the one a multiword token takes when it is collapsed.
CONTENT_UPOS = ("NOUN", "PROPN", "VERB", "ADJ", "ADV", "NUM", "PRON", "INTJ")
_INTEGER = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit also takes '²'
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")
_EMPTY = re.compile(r"[0-9]+\.[0-9]+")


class ConlluError(ValueError):
    """A malformed CoNLL-U file; the message starts with ``file:line:``."""


@dataclass(frozen=True)
class Word:
    """One syntactic word (a line with an integer id)."""

    id: int
    form: str
    lemma: str
    upos: str
    xpos: str = "_"
    feats: str = "_"
    head: int | None = None
    deprel: str = "_"
    deps: str = "_"
    misc: str = "_"
    line: int = 0


@dataclass(frozen=True)
class MultiwordToken:
    """A surface token spanning words ``start..end`` (a range line)."""

    start: int
    end: int
    form: str
    misc: str = "_"
    line: int = 0


@dataclass
class Sentence:
    """Words, multiword ranges and comments of one sentence; ``line`` is its first line."""

    words: list[Word]
    multiword: list[MultiwordToken] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    line: int = 0

    def comment(self, key: str) -> str | None:
        """The value of a ``# key = value`` comment, or None."""
        prefix = f"# {key} ="
        for text in self.comments:
            if text.startswith(prefix):
                return text[len(prefix) :].strip()
        return None


def _fail(path, line: int, message: str) -> ConlluError:
    return ConlluError(f"{path}:{line}: {message}")


def _parse_word(fields: list[str], path, line: int) -> Word:
    form, lemma, upos = fields[1], fields[2], fields[3]
    if upos != "_" and upos not in UPOS_TAGS:
        raise _fail(
            path, line, f"UPOS {upos!r} is not a Universal POS tag ({' '.join(sorted(UPOS_TAGS))})"
        )
    head_field = fields[6]
    if head_field == "_":
        head = None
    elif _INTEGER.fullmatch(head_field):
        head = int(head_field)
    else:
        raise _fail(path, line, f"HEAD {head_field!r} must be a word id, 0 for the root, or '_'")
    if not form:
        raise _fail(path, line, "empty FORM column")
    return Word(
        int(fields[0]),
        form,
        lemma,
        upos,
        fields[4],
        fields[5],
        head,
        fields[7],
        fields[8],
        fields[9],
        line,
    )


def _finish(sentence: Sentence, path) -> Sentence:
    words = sentence.words
    if not words:
        raise _fail(path, sentence.line, "sentence without word lines (only comments or ranges)")
    for expected, word in enumerate(words, start=1):
        if word.id != expected:
            raise _fail(
                path,
                word.line,
                f"word id {word.id} out of order; expected {expected} (ids run 1..n)",
            )
    for word in words:
        if word.head is not None and word.head > len(words):
            raise _fail(
                path, word.line, f"HEAD {word.head} points past the last word ({len(words)})"
            )
    for token in sentence.multiword:
        if token.end > len(words):
            raise _fail(
                path,
                token.line,
                f"multiword range {token.start}-{token.end} goes past the last word "
                f"({len(words)})",
            )
    return sentence


def read_conllu(path) -> list[Sentence]:
    """Read every sentence of a CoNLL-U file, raising :class:`ConlluError` on any bad line."""
    path = Path(path)
    if not path.is_file():
        raise ConlluError(f"{path}: no such CoNLL-U file")
    sentences: list[Sentence] = []
    current: Sentence | None = None
    with open_text(path, ConlluError) as handle:
        lineno = 0
        for lineno, raw in enumerate(handle, start=1):
            text = raw.rstrip("\n").rstrip("\r")
            if not text.strip():
                if current is not None:
                    sentences.append(_finish(current, path))
                    current = None
                continue
            if current is None:
                current = Sentence(words=[], line=lineno)
            if text.startswith("#"):
                if current.words or current.multiword:
                    raise _fail(
                        path,
                        lineno,
                        "comment inside a sentence; comments come before the word lines",
                    )
                current.comments.append(text)
                continue
            fields = text.split("\t")
            if len(fields) != 10:
                raise _fail(
                    path,
                    lineno,
                    f"expected 10 tab-separated columns ({' '.join(COLUMNS)}), got {len(fields)}",
                )
            ident = fields[0]
            if _INTEGER.fullmatch(ident):
                current.words.append(_parse_word(fields, path, lineno))
            elif (match := _RANGE.fullmatch(ident)) is not None:
                start, end = int(match.group(1)), int(match.group(2))
                if start >= end or start != len(current.words) + 1:
                    raise _fail(
                        path,
                        lineno,
                        f"bad multiword range {ident!r}: it must start at the next word id",
                    )
                if current.multiword and start <= current.multiword[-1].end:
                    last = current.multiword[-1]
                    raise _fail(
                        path,
                        lineno,
                        f"multiword range {ident!r} overlaps {last.start}-{last.end} (line "
                        f"{last.line}); a word belongs to one multiword token",
                    )
                current.multiword.append(
                    MultiwordToken(start, end, fields[1], fields[9], lineno)
                )
            elif _EMPTY.fullmatch(ident):
                continue  # empty nodes belong to enhanced dependencies, which no tagger here uses
            else:
                raise _fail(
                    path,
                    lineno,
                    f"bad ID {ident!r}: use an integer, a range 'a-b' or an empty node 'a.b'",
                )
        if current is not None:
            sentences.append(_finish(current, path))
    if not sentences:
        raise ConlluError(f"{path}:{lineno}: no sentences in the file")
    return sentences


def _word_line(word: Word) -> str:
    head = "_" if word.head is None else str(word.head)
    values = (
        str(word.id),
        word.form,
        word.lemma,
        word.upos,
        word.xpos,
        word.feats,
        head,
        word.deprel,
        word.deps,
        word.misc,
    )
    return "\t".join(values)


def format_conllu(sentences) -> str:
    """CoNLL-U text for ``sentences`` (ranges before their first word, a blank line after each)."""
    lines: list[str] = []
    for sentence in sentences:
        lines.extend(sentence.comments)
        ranges = {token.start: token for token in sentence.multiword}
        for word in sentence.words:
            if word.id in ranges:
                token = ranges[word.id]
                lines.append(
                    f"{token.start}-{token.end}\t{token.form}\t_\t_\t_\t_\t_\t_\t_\t{token.misc}"
                )
            lines.append(_word_line(word))
        lines.append("")
    return "\n".join(lines) + "\n"


def write_conllu(sentences, path) -> None:
    """Write ``sentences`` to ``path`` atomically (temporary file, then rename)."""
    atomic_write_text(path, format_conllu(sentences))


def _is_tree(heads: list[int]) -> bool:
    """True when ``heads`` (1-based, 0 = root) form a tree with exactly one root."""
    if sum(h == 0 for h in heads) != 1:
        return False
    for start in range(1, len(heads) + 1):
        node, steps = start, 0
        while node != 0:
            node, steps = heads[node - 1], steps + 1
            if steps > len(heads):
                return False
    return True


def surface_sentence(sentence: Sentence, retokenize=None, normalise_lemma=None) -> Sentence:
    """The sentence as the surface tokens a tokeniser sees, for training and scoring taggers.

    rudder's tokeniser yields surface tokens and no multiword expander is trained here, so
    taggers train and are scored on surface tokens. Each multiword token becomes one word
    with its surface form and the UPOS, lemma, features and relation of its first word with
    a content UPOS (:data:`CONTENT_UPOS`), else of its first word (Marathi ``लाडामुळे`` =
    ``लाडा`` NOUN + ``मुळे`` ADP becomes one NOUN with lemma ``लाड``). ``retokenize(form)``
    (e.g. ``lambda f: rudder.text.tokenize(f, lang)``) then maps each form to the tokens
    the tokeniser makes of it: none drops the word (punctuation), several split it (each
    piece keeps the UPOS and is its own lemma, as the word's lemma names the whole, e.g. a
    URL, unless lemmas are missing (``_``); the later pieces attach to the first as ``flat``).
    ``normalise_lemma`` is applied to lemmas. Heads are renumbered (a dropped word's
    dependents climb to its head); when that does not give a tree, the sentence gets a
    flat one (first word the root, the rest ``dep``) so that Stanza's scorer reads it.
    """
    ranges = {token.start: token for token in sentence.multiword}
    units: list[tuple[Word, str]] = []  # (word carrying the tags, surface form)
    unit_of: dict[int, int] = {}  # old word id -> unit index
    index, words = 0, sentence.words
    while index < len(words):
        token = ranges.get(words[index].id)
        members = [words[index]] if token is None else words[token.start - 1 : token.end]
        inside = {w.id for w in members}
        chosen = (
            next((w for w in members if w.upos in CONTENT_UPOS), members[0])
            if token
            else members[0]
        )
        outside = [w.head for w in members if w.head is not None and w.head not in inside]
        head = chosen.head if chosen.head not in inside else (outside[0] if outside else None)
        for member in members:
            unit_of[member.id] = len(units)
        units.append((replace(chosen, head=head), chosen.form if token is None else token.form))
        index += len(members)
    tokens = [list(retokenize(form)) if retokenize is not None else [form] for _, form in units]
    first_id, position = {}, 0
    for u, toks in enumerate(tokens):
        if toks:
            first_id[u] = position + 1
            position += len(toks)

    def new_head(u: int) -> int | None:
        """New id of the head of unit ``u``, climbing over dropped units."""
        for _ in range(len(units) + 1):
            head = units[u][0].head
            if head is None or head == 0:
                return head
            u = unit_of[head]
            if u in first_id:
                return first_id[u]
        return None  # a cycle

    out: list[Word] = []
    for u, (word, _) in enumerate(units):
        if not tokens[u]:
            continue
        lemmas = [word.lemma] * len(tokens[u])
        if len(tokens[u]) > 1 and word.lemma != "_":
            lemmas = list(tokens[u])
        if normalise_lemma is not None:
            lemmas = [normalise_lemma(lemma) for lemma in lemmas]
        head = new_head(u)
        deprel = "root" if head == 0 else ("dep" if word.deprel == "root" else word.deprel)
        first = first_id[u]
        out.append(
            replace(word, id=first, form=tokens[u][0], lemma=lemmas[0], head=head, deprel=deprel)
        )
        out += [
            replace(word, id=first + k, form=text, lemma=lemmas[k], head=first, deprel="flat")
            for k, text in enumerate(tokens[u][1:], start=1)
        ]
    heads = [w.head for w in out]
    if out and (None in heads or not _is_tree(cast("list[int]", heads))):
        out = [
            replace(w, head=0 if w.id == 1 else 1, deprel="root" if w.id == 1 else "dep")
            for w in out
        ]
    return Sentence(words=out, multiword=[], comments=list(sentence.comments), line=sentence.line)


def split_sentences(
    sentences, parts: dict[str, tuple[int, ...]], modulus: int
) -> dict[str, list[Sentence]]:
    """Deterministic split by position: sentence ``i`` goes to the part listing ``i % modulus``.

    Example: ``{"train": (0..6), "dev": (7,), "test": (8, 9)}`` with modulus 10 gives a
    70/10/20 split that interleaves the file, so every part sees every genre of a treebank.
    """
    owner = {}
    for name, residues in parts.items():
        for residue in residues:
            if residue in owner or not 0 <= residue < modulus:
                raise ValueError(
                    f"split: residue {residue} is repeated or outside 0..{modulus - 1}"
                )
            owner[residue] = name
    if len(owner) != modulus:
        raise ValueError(f"split: residues must cover 0..{modulus - 1} exactly once")
    out: dict[str, list[Sentence]] = {name: [] for name in parts}
    for position, sentence in enumerate(sentences):
        out[owner[position % modulus]].append(sentence)
    return out
