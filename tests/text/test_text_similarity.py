"""rudder.text.CaptionSimilarity: TF-IDF char n-gram cosine in every script."""

import math

import pytest
import torch

from rudder.text import CaptionSimilarity


def test_hand_worked_tfidf_cosine():
    # char_wb 2..4-grams of " ab " and " ac ": six each, sharing only " a" (df 2, idf 1);
    # the five others have df 1, idf = ln(3/2) + 1. Cosine = 1 / (1 + 5 idf^2).
    sim = CaptionSimilarity().fit(["ab", "ac"])
    idf = math.log(3 / 2) + 1
    expected = 1 / (1 + 5 * idf**2)
    sims = sim.pairwise(["ab", "ac"])
    assert sims.dtype == torch.float32 and sims.shape == (2, 2)
    assert sims[0, 1].item() == pytest.approx(expected, rel=1e-6)
    assert sims[0, 0].item() == pytest.approx(1.0)


CORPUS = {
    "mr": ["बाटली कापा", "बाटलीला कापा आणि चिकटवा", "चुंबक ठेवा"],
    "hi": ["बोतल काटें", "बोतल को काटें और चिपकाएँ", "चुंबक रखें"],
    "ta": ["பாட்டிலை வெட்டவும்", "பாட்டிலை வெட்டி ஒட்டவும்", "காந்தத்தை வைக்கவும்"],
    "te": ["సీసాను కత్తిరించండి", "సీసాను కత్తిరించి అతికించండి", "అయస్కాంతం ఉంచండి"],
    "en": ["cut the bottle", "cut the bottle and glue it", "place the magnet"],
}


@pytest.mark.parametrize("lang", sorted(CORPUS))
def test_related_captions_are_closer_in_every_script(lang):
    texts = CORPUS[lang]
    sims = CaptionSimilarity().fit([t for group in CORPUS.values() for t in group]).pairwise(texts)
    assert torch.allclose(sims, sims.T) and torch.allclose(torch.diagonal(sims), torch.ones(3))
    assert sims[0, 1] > 0.3 > sims[0, 2]  # shared stems vs another object and action


def test_cross_script_and_unseen_texts():
    sim = CaptionSimilarity().fit(CORPUS["mr"] + CORPUS["ta"])
    sims = sim.pairwise(CORPUS["mr"][:1], CORPUS["ta"][:1] + ["xyz"])
    assert sims.shape == (1, 2) and torch.equal(sims, torch.zeros(1, 2))  # no shared n-gram


def test_errors():
    with pytest.raises(RuntimeError, match="call .fit"):
        CaptionSimilarity().pairwise(["a"])
    with pytest.raises(TypeError, match="list of texts, got one str"):
        CaptionSimilarity().fit("cut the bottle")
    with pytest.raises(TypeError, match="text 1 is NoneType"):
        CaptionSimilarity().fit(["a", None])
    with pytest.raises(ValueError, match="no texts"):
        CaptionSimilarity().fit([])
