"""Order candidate captions for annotation by the noun/verb heuristics.

For a query caption, candidates are captions of *other* videos (optionally one language).
With noun/verb class columns (manual or from ``python -m heuristics label``) they are
ordered by the RUDDER noun/verb heuristic label (positive, then partial, then negative;
:func:`rudder.supervision.partial_labels`), then by the relevance R
(:func:`rudder.supervision.relevance`), then by dataset order. With lemma columns but no
classes, lemmas stand in for classes (same-language matches only). Without either, by
TF-IDF character n-gram similarity (:class:`rudder.text.CaptionSimilarity`), and the UI
says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rudder.data.classes import ClassIndex
from rudder.labels import NO_LABEL
from rudder.supervision import partial_labels, relevance
from rudder.text import CaptionSimilarity

from .annotations_db import LABEL_NAMES
from .collection import Collection


class CandidateRanker:
    """Candidate order for every query caption of one collection.

    Multi-hot class matrices of all captions are built once (dense ``(n, C)`` float32).
    """

    def __init__(self, collection: Collection, alpha_n: float = 0.5, alpha_v: float = 0.5):
        self.collection = collection
        self.alpha_n, self.alpha_v = alpha_n, alpha_v
        captions = collection.captions
        if {"noun_classes", "verb_classes"} <= set(captions.columns):
            columns, self.method = ("noun_classes", "verb_classes"), "classes"
        elif {"nouns", "verbs"} <= set(captions.columns):
            columns, self.method = ("nouns", "verbs"), "lemmas"
        else:
            columns, self.method = None, "text"
        if columns is None:
            self.similarity = CaptionSimilarity().fit(captions["text"].tolist())
        else:
            nouns, verbs = (captions[c].tolist() for c in columns)
            index = ClassIndex.build(nouns, verbs)
            self.nouns, self.verbs = index.multi_hot(nouns), index.multi_hot(verbs)

    @property
    def description(self) -> str:
        return {
            "classes": "ordered by the noun/verb heuristic label, then relevance R "
            "(noun/verb classes)",
            "lemmas": "ordered by the noun/verb heuristic label, then relevance R "
            "(noun/verb lemmas; "
            "no class columns, so only same-language matches count)",
            "text": "ordered by character n-gram similarity: this dataset has no noun/verb columns "
            "(add them with `python -m heuristics label --dataset DIR`)",
        }[self.method]

    def rank(self, caption_id: str, lang: str | None = None, limit: int = 20) -> pd.DataFrame:
        """The first ``limit`` candidates of ``caption_id`` (in ``lang`` if given), best first.

        Columns: ``row`` (position in ``collection.captions``), ``caption_id``, ``video_id``,
        ``lang``, ``text``, ``heuristic`` (label name or ``None``), ``relevance``,
        ``similarity`` (text mode only, else NaN).
        """
        captions = self.collection.captions
        q = int(self.collection.row_of[caption_id])
        keep = captions["video_id"].to_numpy() != captions["video_id"].iat[q]
        if lang is not None:
            keep &= captions["lang"].to_numpy() == lang
        rows = np.flatnonzero(keep)
        n = len(captions)
        heuristic = np.full(n, NO_LABEL, dtype=np.int64)
        rel = np.full(n, np.nan)
        sim = np.full(n, np.nan)
        order_keys: tuple[np.ndarray, ...]  # np.lexsort's keys, the last one primary
        if self.method == "text":
            sim = self.similarity.pairwise([captions["text"].iat[q]], captions["text"].tolist())[
                0
            ].numpy()
            order_keys = (rows, -sim[rows])
        else:
            one = slice(q, q + 1)
            heuristic = (
                partial_labels(
                    self.nouns[one],
                    self.verbs[one],
                    self.nouns,
                    self.verbs,
                    self.alpha_n,
                    self.alpha_v,
                )[0]
                .numpy()
                .astype(np.int64)
            )
            rel = relevance(self.nouns[one], self.verbs[one], self.nouns, self.verbs)[0].numpy()
            order_keys = (rows, -rel[rows], -heuristic[rows])
        chosen = rows[np.lexsort(order_keys)][:limit]
        table = captions.iloc[chosen][["caption_id", "video_id", "lang", "text"]].reset_index(
            drop=True
        )
        table.insert(0, "row", chosen)
        table["heuristic"] = [LABEL_NAMES.get(int(h)) for h in heuristic[chosen]]
        table["relevance"] = rel[chosen]
        table["similarity"] = sim[chosen]
        return table

    def pair(self, caption_id: str, candidate_id: str) -> dict:
        """The hints :meth:`rank` gives one candidate (``row``, ``caption_id``, ``heuristic``,
        ``relevance``, ``similarity``), for a pair shown from a queue."""
        captions = self.collection.captions
        q, c = int(self.collection.row_of[caption_id]), int(self.collection.row_of[candidate_id])
        hints = {"row": c, "caption_id": candidate_id, "heuristic": None,
                 "relevance": np.nan, "similarity": np.nan}
        if self.method == "text":
            texts = captions["text"]
            hints["similarity"] = float(
                self.similarity.pairwise([texts.iat[q]], [texts.iat[c]])[0, 0])
            return hints
        one, other = slice(q, q + 1), slice(c, c + 1)
        label = partial_labels(self.nouns[one], self.verbs[one], self.nouns[other],
                               self.verbs[other], self.alpha_n, self.alpha_v)[0, 0]
        hints["heuristic"] = LABEL_NAMES.get(int(label))
        hints["relevance"] = float(
            relevance(self.nouns[one], self.verbs[one], self.nouns[other], self.verbs[other])[0, 0])
        return hints
