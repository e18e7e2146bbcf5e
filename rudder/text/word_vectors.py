"""Pretrained word vectors from local files: fastText ``.vec``/``.bin``, GloVe ``.txt``,
word2vec binary; and the initial embedding table of a vocabulary.

Formats (detected from the file's first bytes, not its name):
- text with a header line ``<count> <dim>`` then ``word v1 .. vdim`` per line (fastText
  ``.vec``, word2vec text);
- text without a header (GloVe ``.txt``): every line ``word v1 .. vdim``;
- word2vec binary (Mikolov et al. 2013, ``word2vec.c``): the header line, then per word
  ``word<space>`` followed by ``dim`` little-endian float32 values (and an optional newline);
- fastText binary model (``.bin``, format version 11/12 of fastText's ``src/fasttext.cc``:
  magic 793712314, args, dictionary, input matrix): word vectors are fastText's
  ``getWordVector``, the mean of the word's row and its character n-gram rows
  (:mod:`rudder.text.subwords`), so words *absent* from the file still get a vector.

Only the requested words are kept while reading (a fastText ``.bin``'s matrix is mapped,
not read), so a 2-million-word file costs the memory of the vocabulary, not of the file.
A header's word count is honoured: text files are read for that many words, and fewer is
an error, as fastText's ``loadVectors`` and gensim read them. A word listed twice keeps its
last vector, as fastText's ``loadVectors``. Aligned multilingual vectors (one space for several
languages, e.g. fastText's aligned ``wiki.<lang>.align.vec``) need nothing special: give
one file for every language.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rudder.errors import RudderError
from rudder.text.subwords import char_ngrams, fasttext_hash

FASTTEXT_MAGIC = 793712314
SUPERVISED = 3  # fastText's model_name::sup
EOS = "</s>"


class WordVectorError(RudderError):
    """A word-vector file that cannot be read; the message names the file and the line."""


@dataclass
class WordVectors:
    """Vectors of the words found: ``vectors[i]`` belongs to ``words[i]``."""

    path: Path
    dim: int
    words: list[str]
    vectors: np.ndarray  # (n, dim) float32
    _index: dict = field(init=False, repr=False)

    def __post_init__(self):
        self._index = {w: i for i, w in enumerate(self.words)}

    def get(self, word: str):
        i = self._index.get(word)
        return None if i is None else self.vectors[i]


def load_word_vectors(path, wanted=None) -> WordVectors:
    """Read ``path`` (any format above), keeping only ``wanted`` words when given."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise WordVectorError(f"{path}: no such word-vector file (data.word_vectors)")
    wanted = None if wanted is None else set(wanted)
    with path.open("rb") as handle:
        head = handle.read(4)
        handle.seek(0)
        if len(head) == 4 and struct.unpack("<i", head)[0] == FASTTEXT_MAGIC:
            return _read_fasttext_bin(path, handle, wanted)
        first = handle.readline()
        header = _header(first)
        if header is None:
            handle.seek(0)
            return _read_text(path, handle, wanted, None, first_line=1)
        line = handle.readline(1 << 16)
        handle.seek(len(first))
        if line and not _is_text_line(line, header[1]):
            return _read_word2vec_binary(path, handle, wanted, *header)
        return _read_text(path, handle, wanted, header, first_line=2)


def _header(line: bytes):
    parts = line.split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


def _is_text_line(line: bytes, dim: int) -> bool:
    """``line`` reads as ``word v1 .. vdim`` in text; a word2vec binary record (the word,
    then raw float32 bytes) does not. Bytes that are not UTF-8 in the word do not matter
    (word2vec.c cuts words inside characters)."""
    parts = line.rstrip(b"\r\n ").split(b" ")
    if len(parts) != dim + 1:
        return False
    try:
        [float(part) for part in parts[1:]]
    except ValueError:
        return False
    return True


def _read_text(path, handle, wanted, header, first_line):
    count, dim = header if header else (None, None)
    words, rows, seen = [], [], 0
    for line_no, raw in enumerate(handle, start=first_line):
        if seen == count:
            break
        parts = raw.decode("utf-8", errors="replace").rstrip("\n\r ").split(" ")
        if parts == [""]:
            continue
        seen += 1
        if dim is None:
            dim = len(parts) - 1
        if len(parts) != dim + 1:
            raise WordVectorError(
                f"{path}, line {line_no}: expected a word and {dim} numbers, got {len(parts) - 1} "
                "numbers (is the file cut, or does a word contain a space?)"
            )
        if wanted is not None and parts[0] not in wanted:
            continue
        try:
            rows.append(np.asarray(parts[1:], dtype=np.float32))
        except ValueError:
            raise WordVectorError(f"{path}, line {line_no}: a value is not a number") from None
        words.append(parts[0])
    if dim is None:
        raise WordVectorError(f"{path}: the file holds no vectors")
    if count is not None and seen < count:
        raise WordVectorError(f"{path}: cut after {seen} of the {count} words its header names")
    return WordVectors(path, dim, words, _stack(rows, dim))


def _read_word2vec_binary(path, handle, wanted, count, dim):
    words, rows = [], []
    size = 4 * dim
    for index in range(count):
        word = bytearray()
        while (char := handle.read(1)) != b" ":
            if not char:
                raise WordVectorError(
                    f"{path}: cut after {index} of {count} words (word2vec binary)")
            if char != b"\n" or word:
                word += char
        data = handle.read(size)
        if len(data) != size:
            raise WordVectorError(
                f"{path}: cut inside the vector of word {index + 1} (word2vec binary)")
        text = word.decode("utf-8", errors="replace")
        if wanted is None or text in wanted:
            words.append(text)
            rows.append(np.frombuffer(data, dtype="<f4"))
    return WordVectors(path, dim, words, _stack(rows, dim))


def _stack(rows, dim) -> np.ndarray:
    return np.stack(rows).astype(np.float32) if rows else np.zeros((0, dim), np.float32)


class _Reader:
    """Little-endian reads from a binary stream, naming the file when it is cut."""

    def __init__(self, path, handle: io.BufferedReader):
        self.path, self.handle = path, handle

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        data = self.handle.read(size)
        if len(data) != size:
            raise WordVectorError(
                f"{self.path}: cut fastText binary (ended at byte {self.handle.tell()})")
        return struct.unpack(fmt, data)

    def word(self) -> str:
        out = bytearray()
        while (char := self.handle.read(1)) != b"\x00":
            if not char:
                raise WordVectorError(f"{self.path}: cut fastText binary inside the dictionary")
            out += char
        return out.decode("utf-8", errors="replace")


def _read_fasttext_bin(path, handle, wanted):
    """fastText ``.bin``: ``getWordVector`` for each wanted word (all dictionary words if None)."""
    read = _Reader(path, handle)
    _, version = read.take("<ii")
    if version not in (11, 12):
        raise WordVectorError(
            f"{path}: fastText binary version {version} is not supported (11, 12)")
    (dim, _ws, _epoch, _min_count, _neg, _word_ngrams, _loss, model, bucket, minn, maxn,
     _lr) = read.take("<12i")
    if version == 11 and model == SUPERVISED:
        maxn = 0  # fastText's loadModel: old supervised models use no character n-grams
    read.take("<d")  # sampling threshold t
    _size, nwords, _nlabels = read.take("<3i")
    _ntokens, prune_size = read.take("<2q")
    dictionary = []
    for _ in range(_size):
        word = read.word()
        read.take("<qb")  # count, entry type
        dictionary.append(word)
    prune = dict(read.take("<2i") for _ in range(max(prune_size, 0)))
    (quantized,) = read.take("<?")
    if quantized:
        raise WordVectorError(
            f"{path}: quantised fastText models (.ftz) are not supported; use the .bin")
    rows, cols = read.take("<2q")
    if cols != dim:
        raise WordVectorError(f"{path}: input matrix has {cols} columns but dim is {dim}")
    offset = handle.tell()
    if path.stat().st_size < offset + 4 * rows * cols:
        raise WordVectorError(f"{path}: cut fastText binary inside the input matrix")
    matrix = np.memmap(path, dtype="<f4", mode="r", offset=offset, shape=(rows, cols))
    word_id = {w: i for i, w in enumerate(dictionary[:nwords])}

    def ngram_rows(word: str) -> list[int]:
        if prune_size == 0 or maxn == 0 or bucket == 0 or word == EOS:
            return []  # fastText gives its end-of-sentence token no n-grams
        out = []
        for gram in char_ngrams(word, minn, maxn):
            h = fasttext_hash(gram) % bucket
            if prune_size > 0:
                if h not in prune:
                    continue
                h = prune[h]
            out.append(nwords + h)
        return out

    words = list(word_id) if wanted is None else sorted(wanted)
    kept, vectors = [], []
    for word in words:
        ids = ([word_id[word]] if word in word_id else []) + ngram_rows(word)
        if ids:
            kept.append(word)
            vectors.append(matrix[ids].mean(axis=0))
    return WordVectors(path, dim, kept, _stack(vectors, dim))
