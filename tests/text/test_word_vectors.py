"""rudder.text.word_vectors: every supported format, written here in its published layout."""

import struct

import numpy as np
import pytest

from rudder.text.subwords import char_ngrams, fasttext_hash
from rudder.text.word_vectors import FASTTEXT_MAGIC, WordVectorError, load_word_vectors

VECTORS = {"cut": [1.0, 2.0, 3.0], "कागद": [0.5, -1.0, 2.5], "glue": [-2.0, 0.0, 1.0]}


def write_text(path, header: bool):
    lines = [f"{len(VECTORS)} 3"] if header else []
    lines += [f"{w} " + " ".join(str(v) for v in vec) for w, vec in VECTORS.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_word2vec_binary(path):
    with path.open("wb") as out:
        out.write(f"{len(VECTORS)} 3\n".encode())
        for word, vec in VECTORS.items():
            out.write(word.encode() + b" " + np.asarray(vec, "<f4").tobytes() + b"\n")
    return path


def write_fasttext_bin(path, words, matrix, bucket, minn, maxn, prune=None, version=12, model=2):
    """fastText's .bin layout (src/fasttext.cc saveModel; model 2 skipgram, 3 supervised)."""
    dim = matrix.shape[1]
    with path.open("wb") as out:
        out.write(struct.pack("<ii", FASTTEXT_MAGIC, version))
        out.write(struct.pack("<12i", dim, 5, 5, 1, 5, 1, 2, model, bucket, minn, maxn, 100))
        out.write(struct.pack("<d", 1e-4))
        out.write(struct.pack("<3i", len(words), len(words), 0))
        out.write(struct.pack("<2q", 100, -1 if prune is None else len(prune)))
        for word in words:
            out.write(word.encode() + b"\x00" + struct.pack("<qb", 3, 0))
        for pair in (prune or {}).items():
            out.write(struct.pack("<2i", *pair))
        out.write(struct.pack("<?", False))
        out.write(struct.pack("<2q", *matrix.shape) + matrix.astype("<f4").tobytes())
        out.write(struct.pack("<?", False))
        out.write(struct.pack("<2q", 1, dim) + np.zeros(dim, "<f4").tobytes())
    return path


@pytest.mark.parametrize("writer", [
    lambda p: write_text(p / "v.vec", header=True),
    lambda p: write_text(p / "glove.txt", header=False),
    lambda p: write_word2vec_binary(p / "w2v.bin"),
], ids=["fasttext-vec", "glove", "word2vec-binary"])
def test_each_format_reads_the_same_vectors(tmp_path, writer):
    vectors = load_word_vectors(writer(tmp_path))
    assert vectors.dim == 3 and vectors.words == list(VECTORS)
    for word, vec in VECTORS.items():
        np.testing.assert_allclose(vectors.get(word), vec)
    kept = load_word_vectors(writer(tmp_path), wanted={"कागद", "absent"})
    assert kept.words == ["कागद"] and kept.get("cut") is None


def test_fasttext_bin_gives_subword_vectors_to_unknown_words(tmp_path):
    bucket, minn, maxn, dim = 50, 2, 3, 4
    rng = np.random.default_rng(0)
    words = ["cut", "paper"]
    matrix = rng.normal(size=(len(words) + bucket, dim)).astype(np.float32)
    path = write_fasttext_bin(tmp_path / "m.bin", words, matrix, bucket, minn, maxn)
    vectors = load_word_vectors(path, wanted={"cut", "cuts"})

    def rows(word):  # fastText getSubwords, written out from dictionary.cc
        return [len(words) + fasttext_hash(g) % bucket for g in char_ngrams(word, minn, maxn)]

    np.testing.assert_allclose(vectors.get("cut"), matrix[[0, *rows("cut")]].mean(0), rtol=1e-6)
    np.testing.assert_allclose(vectors.get("cuts"), matrix[rows("cuts")].mean(0), rtol=1e-6)


def test_fasttext_bin_with_pruned_ngrams(tmp_path):
    words, dim = ["ab"], 2
    matrix = np.arange(2 * 3, dtype=np.float32).reshape(3, dim)  # 1 word + 2 kept n-grams
    first = fasttext_hash("<ab") % 10
    path = write_fasttext_bin(tmp_path / "p.bin", words, matrix, 10, 3, 3, prune={first: 1})
    vectors = load_word_vectors(path, wanted={"ab"})
    np.testing.assert_allclose(vectors.get("ab"), (matrix[0] + matrix[2]) / 2)


def test_fasttext_bin_special_cases(tmp_path):
    # fastText gives its end-of-sentence token </s> no n-grams (Dictionary::initNgrams), and
    # an old (version 11) supervised model none at all (FastText::loadModel)
    bucket, dim = 20, 2
    matrix = np.random.default_rng(1).normal(size=(2 + bucket, dim)).astype(np.float32)
    path = write_fasttext_bin(tmp_path / "eos.bin", ["</s>", "cut"], matrix, bucket, 2, 3)
    np.testing.assert_allclose(load_word_vectors(path).get("</s>"), matrix[0])
    old = write_fasttext_bin(tmp_path / "sup.bin", ["</s>", "cut"], matrix, bucket, 2, 3,
                             version=11, model=3)
    vectors = load_word_vectors(old, wanted={"cut", "cuts"})
    np.testing.assert_allclose(vectors.get("cut"), matrix[1])
    assert vectors.get("cuts") is None


def test_a_byte_that_is_not_utf8_leaves_a_text_file_text(tmp_path):
    # word2vec.c cuts words inside characters; the file is still text, not word2vec binary
    path = tmp_path / "latin1.vec"
    path.write_bytes(b"2 2\ncaf\xe9 1.5 -2.5\nb 0.5 0.25\n")
    np.testing.assert_allclose(load_word_vectors(path).vectors, [[1.5, -2.5], [0.5, 0.25]])


def test_the_header_word_count_is_honoured(tmp_path):
    short = tmp_path / "short.vec"
    short.write_text("5 2\na 1 2\nb 3 4\n", encoding="utf-8")
    with pytest.raises(WordVectorError, match="short.vec: cut after 2 of the 5 words"):
        load_word_vectors(short)
    longer = tmp_path / "longer.vec"
    longer.write_text("1 2\na 1 2\nb 3 4\n", encoding="utf-8")
    assert load_word_vectors(longer).words == ["a"]  # fastText's loadVectors reads 1 row


def test_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.vec"
    bad.write_text("2 3\ncut 1 2 3\nglue 1 2\n", encoding="utf-8")
    with pytest.raises(WordVectorError, match=r"bad.vec, line 3: expected a word and 3 numbers"):
        load_word_vectors(bad)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(write_word2vec_binary(tmp_path / "w.bin").read_bytes()[:-9])
    with pytest.raises(WordVectorError, match="cut.bin: cut inside the vector"):
        load_word_vectors(cut)
    with pytest.raises(WordVectorError, match="no such word-vector file"):
        load_word_vectors(tmp_path / "missing.vec")
