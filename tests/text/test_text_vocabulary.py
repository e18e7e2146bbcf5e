"""rudder.text.Vocabulary: deterministic ids, padding, round trip."""

import json

import pytest
import torch

from rudder.text import PAD, UNK, Vocabulary

CAPTIONS = [["cut", "the", "bottle"], ["glue", "the", "straw"], ["cut", "the", "straw"], ["magnet"]]


def test_order_frequency_then_token():
    vocab = Vocabulary.build(CAPTIONS)
    # the: 3; cut, straw: 2 (alphabetical); bottle, glue, magnet: 1 (alphabetical).
    assert vocab.tokens == ["<pad>", "<unk>", "the", "cut", "straw", "bottle", "glue", "magnet"]
    assert Vocabulary.build(reversed(CAPTIONS)) == vocab
    assert len(vocab) == 8 and "cut" in vocab and PAD == 0 and UNK == 1


def test_min_count_and_max_size():
    assert Vocabulary.build(CAPTIONS, min_count=2).tokens[2:] == ["the", "cut", "straw"]
    assert Vocabulary.build(CAPTIONS, max_size=2).tokens[2:] == ["the", "cut"]
    assert Vocabulary.build(CAPTIONS, min_count=4).tokens == ["<pad>", "<unk>"]
    with pytest.raises(ValueError, match="min_count must be >= 1"):
        Vocabulary.build(CAPTIONS, min_count=0)


def test_encode_decode_unknown():
    vocab = Vocabulary.build(CAPTIONS)
    assert vocab.encode(["cut", "the", "kite"]) == [3, 2, UNK]
    assert vocab.decode([3, 2, 1, 0]) == ["cut", "the", "<unk>", "<pad>"]


def test_batch_pads_to_longest_and_truncates():
    vocab = Vocabulary.build(CAPTIONS)
    ids, mask = vocab.batch([["cut", "the", "bottle"], [], ["kite", "glue"]])
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    assert ids.tolist() == [[3, 2, 5], [0, 0, 0], [1, 6, 0]]
    assert mask.tolist() == [[True, True, True], [False, False, False], [True, True, False]]
    ids, mask = vocab.batch([["cut", "the", "bottle"], ["glue"]], max_len=2)
    assert ids.tolist() == [[3, 2], [6, 0]] and mask.tolist() == [[True, True], [True, False]]
    ids, mask = vocab.batch([[], []])  # one fully masked column
    assert ids.tolist() == [[0], [0]] and not mask.any()
    with pytest.raises(ValueError, match="empty batch"):
        vocab.batch([])


def test_dict_round_trip_through_json():
    vocab = Vocabulary.build([["बाटली", "कापा"], ["बाटली"]])
    restored = Vocabulary.from_dict(json.loads(json.dumps(vocab.to_dict(), ensure_ascii=False)))
    assert restored == vocab and restored.encode(["कापा", "बाटली"]) == vocab.encode(
        ["कापा", "बाटली"]
    )
    with pytest.raises(ValueError, match="first two tokens"):
        Vocabulary.from_dict({"tokens": ["a", "b"]})
    with pytest.raises(ValueError, match="duplicate tokens"):
        Vocabulary.from_dict({"tokens": ["<pad>", "<unk>", "a", "a"]})
    with pytest.raises(ValueError, match="'tokens' list"):
        Vocabulary.from_dict({})
