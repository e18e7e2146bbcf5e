import pytest

from heuristics.conllu import Word
from heuristics.evaluation import score
from heuristics.nouns_verbs import TaggedWord


def gold(*pairs):
    return [Word(i, form, lemma, upos) for i, (form, lemma, upos) in enumerate(pairs, start=1)]


def test_scores_by_hand():
    g = [
        gold(("cut", "cut", "VERB"), ("papers", "paper", "NOUN"), ("is", "be", "AUX")),
        gold(("Ravi", "ravi", "PROPN"), ("runs", "run", "VERB")),
    ]
    p = [
        [
            TaggedWord("cut", "cut", "VERB"),
            TaggedWord("papers", "papers", "NOUN"),
            TaggedWord("is", "be", "VERB"),
        ],
        [TaggedWord("Ravi", "ravi", "NOUN"), TaggedWord("runs", "run", "NOUN")],
    ]
    s = score(g, p, "en")
    assert s["words"] == 5
    assert s["upos_accuracy"] == pytest.approx(
        2 / 5
    )  # cut, papers (Ravi PROPN->NOUN is wrong UPOS)
    assert s["lemma_accuracy"] == pytest.approx(4 / 5)  # all but papers
    # nouns (NOUN/PROPN): gold {papers, Ravi}, predicted {papers, Ravi, runs}: TP 2
    assert (s["noun"]["precision"], s["noun"]["recall"]) == pytest.approx((2 / 3, 1.0))
    assert s["noun"]["f1"] == pytest.approx(0.8)
    # with lemmas only Ravi counts: P 1/3, R 1/2 -> F1 0.4
    assert s["noun"]["f1_with_lemma"] == pytest.approx(0.4)
    # verbs: gold {cut, runs}, predicted {cut, is}: TP 1 -> P = R = F1 = 0.5
    assert (s["verb"]["precision"], s["verb"]["recall"], s["verb"]["f1"]) == pytest.approx(
        (0.5, 0.5, 0.5)
    )


def test_no_gold_lemmas_and_misaligned_input():
    g = [gold(("చూసేరా", "_", "VERB"))]
    s = score(g, [[TaggedWord("చూసేరా", "చూసేరా", "VERB")]], "te")
    assert (
        s["lemma_accuracy"] is None
        and s["verb"]["f1_with_lemma"] is None
        and s["verb"]["f1"] == 1.0
    )
    with pytest.raises(ValueError, match="sentence 0: 1 gold words but 0 tagged"):
        score(g, [[]], "te")
