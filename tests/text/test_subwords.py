"""rudder.text.subwords: fastText's hash and n-grams, and the subword vocabulary."""

import pytest
import torch

from rudder.data.layout import ExpertInfo
from rudder.models import CollaborativeExperts, ModelConfig
from rudder.text import PAD, UNK
from rudder.text.subwords import (
    SubwordVocabulary,
    char_ngrams,
    fasttext_hash,
    ngram_buckets,
    vocabulary_from_dict,
)


def test_hash_matches_fnv1a_test_vectors_on_ascii():
    # Published FNV-1a 32-bit vectors (ASCII bytes: fastText's sign extension changes nothing).
    assert fasttext_hash("") == 0x811C9DC5
    assert fasttext_hash("a") == 0xE40C292C
    assert fasttext_hash("foobar") == 0xBF9CF968


def test_hash_sign_extends_bytes_like_fasttext():
    # "é" is C3 A9; fastText XORs int8(0xC3) = -61 -> 0xFFFFFFC3, then multiplies.
    h = 0x811C9DC5
    for signed in (0xFFFFFFC3, 0xFFFFFFA9):
        h = ((h ^ signed) * 16777619) % 2**32
    assert fasttext_hash("é") == h
    plain = 0x811C9DC5
    for byte in "é".encode():
        plain = ((plain ^ byte) * 16777619) % 2**32
    assert fasttext_hash("é") != plain  # standard FNV-1a would give another bucket


def test_char_ngrams_in_fasttext_order():
    assert char_ngrams("ab", 1, 3) == ["<a", "<ab", "a", "ab", "ab>", "b", "b>"]
    assert char_ngrams("ab", 3, 6) == ["<ab", "<ab>", "ab>"]
    # Characters, not bytes: a Devanagari word of 3 code points has 5 wrapped characters.
    assert char_ngrams("कागद", 5, 5) == ["<कागद", "कागद>"]


def test_vocabulary_rows_of_known_and_unknown_words():
    vocab = SubwordVocabulary(["<pad>", "<unk>", "cat"], buckets=10, min_n=3, max_n=3)
    offset = len(vocab.tokens)
    assert vocab.table_size == 13
    cat = [offset + b for b in ngram_buckets("cat", 10, 3, 3)]
    assert vocab.token_rows("cat") == [2, *cat]
    cats = [offset + b for b in ngram_buckets("cats", 10, 3, 3)]
    assert vocab.token_rows("cats") == [PAD, *cats]  # unknown word: its n-grams only
    assert vocab.token_rows("") == [UNK]  # nothing to hash: UNK
    ids, mask = vocab.batch([["cat", "cats"], ["cat"]])
    assert ids.shape == (2, 2, 1 + len(cats)) and mask.tolist() == [[True, True], [True, False]]
    assert ids[0, 0, : 1 + len(cat)].tolist() == [2, *cat]
    assert ids[1, 1].tolist() == [PAD] * ids.shape[2]


@pytest.mark.parametrize("max_len", [None, 2])
def test_batch_places_every_tokens_rows(max_len):
    captions = [["cat", "कागदाची", "dogs"], [], ["a", "cat"]]
    vocab = SubwordVocabulary(["<pad>", "<unk>", "cat", "a"], buckets=50, min_n=2, max_n=4)
    ids, mask = vocab.batch(iter(captions), max_len=max_len)  # any iterable
    for b, tokens in enumerate(captions):
        for position in range(ids.shape[1]):
            rows = vocab.token_rows(tokens[position]) if position < len(tokens) else []
            assert mask[b, position] == bool(rows)
            assert ids[b, position].tolist() == rows + [PAD] * (ids.shape[2] - len(rows))
    assert vocab.batch([[], []])[0].shape == (2, 1, 1)


def test_vocabulary_round_trip_keeps_the_hashing():
    vocab = SubwordVocabulary(["<pad>", "<unk>", "cat"], buckets=7, min_n=2, max_n=4)
    again = vocabulary_from_dict(vocab.to_dict())
    assert isinstance(again, SubwordVocabulary) and again == vocab
    assert again.token_rows("dog") == vocab.token_rows("dog")


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="min_n <= max_n"):
        SubwordVocabulary(["<pad>", "<unk>"], buckets=5, min_n=4, max_n=3)


def test_model_averages_a_words_rows():
    config = ModelConfig(shared_dim=4, word_dim=3, text_vlad_clusters=2, video_vlad_clusters=2)
    model = CollaborativeExperts(config, {"object": ExpertInfo(5)}, 6)
    with torch.no_grad():
        model.word_embedding.weight.copy_(torch.arange(18.0).reshape(6, 3))
    words = model._word_features(torch.tensor([[[2, 4, 0], [0, 5, 0]]]),
                                 torch.tensor([[True, True]]))
    expected = torch.stack([(torch.tensor([6.0, 7, 8]) + torch.tensor([12.0, 13, 14])) / 2,
                            torch.tensor([15.0, 16, 17])])
    assert torch.allclose(words[0], expected)
