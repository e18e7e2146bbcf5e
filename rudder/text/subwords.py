"""fastText-style character n-grams: the hash, the n-gram ids of a word, and a vocabulary
whose token batches carry them.

Source: Bojanowski et al., "Enriching Word Vectors with Subword Information" (TACL 2017)
and the fastText reference code (``src/dictionary.cc``: ``hash``, ``computeSubwords``):
a word is wrapped as ``<word>``, every character n-gram with ``min_n <= n <= max_n``
(counted in Unicode characters, i.e. whole UTF-8 sequences) is hashed with 32-bit FNV-1a
(each byte sign-extended as a C ``int8_t`` before the XOR, as fastText does) into one of
``buckets`` rows; the 1-gram made of ``<`` or ``>`` alone is skipped. A word's embedding
is the mean of its own row (when the word is in the vocabulary) and its n-gram rows, so
an inflected form never seen in training ("कागदाची") still shares rows with the forms
that were ("कागद").
"""

from __future__ import annotations

import numpy as np
import torch

from rudder.text.vocabulary import PAD, UNK, Vocabulary

_FNV_OFFSET, _FNV_PRIME, _MASK = 2166136261, 16777619, 0xFFFFFFFF
_CACHED_TOKENS = 1 << 18  # the rows cache starts afresh past this (free-text queries)


def fasttext_hash(text: str) -> int:
    """32-bit FNV-1a of the UTF-8 bytes of ``text``, bytes sign-extended (fastText ``hash``)."""
    h = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        signed = byte - 256 if byte > 127 else byte
        h = ((h ^ (signed & _MASK)) * _FNV_PRIME) & _MASK
    return h


def char_ngrams(word: str, min_n: int = 3, max_n: int = 6) -> list[str]:
    """The character n-grams of ``<word>`` that fastText hashes, in fastText's order."""
    wrapped = f"<{word}>"
    out = []
    for start in range(len(wrapped)):
        for n in range(1, max_n + 1):
            end = start + n
            if end > len(wrapped):
                break
            if n >= min_n and not (n == 1 and (start == 0 or end == len(wrapped))):
                out.append(wrapped[start:end])
    return out


def ngram_buckets(word: str, buckets: int, min_n: int = 3, max_n: int = 6) -> list[int]:
    """Bucket ids ``hash(ngram) % buckets`` of the n-grams of ``word`` (fastText order)."""
    if buckets <= 0 or max_n < min_n:
        return []
    return [fasttext_hash(gram) % buckets for gram in char_ngrams(word, min_n, max_n)]


class SubwordVocabulary(Vocabulary):
    """A :class:`Vocabulary` whose batches hold, per token, its id and its n-gram rows.

    Row ids of the model's embedding table: ``0`` PAD, ``1..len(vocab)-1`` the words
    (``UNK`` stays a row for tokens with no n-gram), ``len(vocab) + b`` n-gram bucket ``b``.
    :meth:`batch` returns ``ids (B, L, 1 + G)`` long, column 0 the word id (PAD where the
    word is unknown but has n-grams), columns 1.. its n-gram rows, PAD-filled; and ``mask
    (B, L)``. The model averages the non-PAD rows (:class:`rudder.models.CollaborativeExperts`).
    """

    def __init__(self, tokens, buckets: int, min_n: int = 3, max_n: int = 6):
        super().__init__(tokens)
        if buckets < 1 or not 1 <= min_n <= max_n:
            raise ValueError(
                f"SubwordVocabulary: need buckets >= 1 and 1 <= min_n <= max_n, got "
                f"buckets={buckets}, min_n={min_n}, max_n={max_n}"
            )
        self.buckets, self.min_n, self.max_n = buckets, min_n, max_n
        self._rows_cache: dict[str, list[int]] = {}

    @property
    def table_size(self) -> int:
        """Rows of the embedding table: words plus n-gram buckets."""
        return len(self.tokens) + self.buckets

    def token_rows(self, token: str) -> list[int]:
        """Embedding rows averaged for ``token``: its word id (if known), then its n-grams."""
        rows = self._rows_cache.get(token)
        if rows is None:
            offset = len(self.tokens)
            grams = [offset + b for b in ngram_buckets(token, self.buckets, self.min_n, self.max_n)]
            word = self.encode([token])[0]
            rows = ([word] if word != UNK or not grams else [PAD]) + grams
            if len(self._rows_cache) >= _CACHED_TOKENS:
                self._rows_cache.clear()
            self._rows_cache[token] = rows
        return rows

    def batch(self, token_lists, max_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        token_lists = [list(tokens) for tokens in token_lists]
        ids, mask = super().batch(token_lists, max_len)
        # the rows of every real token, in the row-major order of mask's True cells
        rows = [self.token_rows(t) for tokens in token_lists for t in tokens[: ids.shape[1]]]
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        width = int(lengths.max(initial=1))
        padded = np.full((len(rows), width), PAD, dtype=np.int64)
        padded[np.arange(width) < lengths[:, None]] = np.fromiter(
            (r for token_rows in rows for r in token_rows), dtype=np.int64, count=lengths.sum())
        out = torch.full((*ids.shape, width), PAD, dtype=torch.long)
        out[mask] = torch.from_numpy(padded)
        return out, mask

    def to_dict(self) -> dict:
        return {**super().to_dict(),
                "subwords": {"buckets": self.buckets, "min_n": self.min_n, "max_n": self.max_n}}

    def __eq__(self, other) -> bool:
        return super().__eq__(other) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"SubwordVocabulary({len(self)} tokens, {self.buckets} n-gram buckets)"


def vocabulary_from_dict(data: dict) -> Vocabulary:
    """A :class:`Vocabulary` or :class:`SubwordVocabulary` from its ``to_dict`` form."""
    vocab = Vocabulary.from_dict(data)
    if "subwords" not in data:
        return vocab
    return SubwordVocabulary(vocab.tokens, **data["subwords"])
