"""Scoring a tagger against gold UD tags: ``python -m heuristics eval-tagger``.

The test treebank goes through the same conversion as training data
(:func:`heuristics.stanza_training.prepare_treebank`: surface tokens of rudder's tokeniser,
normalised lemmas), and the tagger gets the gold tokens (tagging is scored apart from
tokenisation). Scores, over all words: UPOS accuracy; lemma accuracy (exact match of
normalised lemmas); for nouns (NOUN/PROPN) and verbs (VERB), precision, recall and F1 of
the word being one (``P = TP / predicted``, ``R = TP / gold``, ``F1 = 2PR / (P + R)``, 0 when
undefined), and the same F1 counting a hit only when the lemma is also right (what the
noun/verb columns need). A treebank without gold lemmas (all ``_``) gets ``None`` for the
lemma scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conllu import read_conllu
from .nouns_verbs import NOUN_UPOS, normalise
from .stanza_training import prepare_treebank


def _prf(tp: int, predicted: int, gold: int) -> tuple[float, float, float]:
    p = tp / predicted if predicted else 0.0
    r = tp / gold if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def score(gold_words, predicted_words, lang: str) -> dict:
    """Scores of aligned word lists (one list per sentence); see the module docstring."""
    counts = {"words": 0, "upos": 0, "lemma": 0}
    parts = {name: {"tp": 0, "tp_lemma": 0, "predicted": 0, "gold": 0} for name in ("noun", "verb")}
    members = {"noun": NOUN_UPOS, "verb": ("VERB",)}
    for sentence, (gold, pred) in enumerate(zip(gold_words, predicted_words, strict=False)):
        if len(gold) != len(pred):
            raise ValueError(f"sentence {sentence}: {len(gold)} gold words but {len(pred)} tagged")
        for g, p in zip(gold, pred, strict=False):
            lemma_ok = normalise(p.lemma, lang) == g.lemma
            counts["words"] += 1
            counts["upos"] += g.upos == p.upos
            counts["lemma"] += lemma_ok
            for name, tags in members.items():
                in_gold, in_pred = g.upos in tags, p.upos in tags
                parts[name]["gold"] += in_gold
                parts[name]["predicted"] += in_pred
                parts[name]["tp"] += in_gold and in_pred
                parts[name]["tp_lemma"] += in_gold and in_pred and lemma_ok
    words = counts["words"]
    has_lemmas = any(g.lemma not in ("_", "") for sentence in gold_words for g in sentence)
    out: dict[str, Any] = {
        "words": words,
        "upos_accuracy": counts["upos"] / words if words else 0.0,
        "lemma_accuracy": (counts["lemma"] / words if words else 0.0) if has_lemmas else None,
    }
    for name, c in parts.items():
        p, r, f = _prf(c["tp"], c["predicted"], c["gold"])
        with_lemma = _prf(c["tp_lemma"], c["predicted"], c["gold"])[2] if has_lemmas else None
        out[name] = {
            "precision": p,
            "recall": r,
            "f1": f,
            "f1_with_lemma": with_lemma,
            "gold": c["gold"],
            "predicted": c["predicted"],
        }
    return out


def evaluate_tagger(tagger, conllu, lang: str) -> dict:
    """Tag the gold tokens of a CoNLL-U file (a path, or its sentences read with
    ``read_conllu``) with ``tagger`` and score it (module docstring)."""
    read = read_conllu(conllu) if isinstance(conllu, (str, Path)) else conllu
    sentences = prepare_treebank(read, lang)
    gold = [s.words for s in sentences]
    predicted = tagger.tag_tokens([[w.form for w in words] for words in gold], lang)
    result = score(gold, predicted, lang)
    result["sentences"] = len(sentences)
    result["model"] = tagger.model_id(lang)
    return result
