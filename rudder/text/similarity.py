"""Caption-caption similarity from TF-IDF character n-grams.

Used where a loss needs to know which captions say nearly the same thing (the
``hn_exclusion`` loss's ``text_sims``). Character n-grams inside word boundaries
(scikit-learn's ``analyzer="char_wb"``, n = 2..4) work in every script without a
tokeniser and tolerate inflection (Marathi/Hindi/Tamil/Telugu suffixes share stems).
Rows are L2-normalised TF-IDF vectors (smooth idf, sublinear tf), so the similarity is
their cosine, in [0, 1]; a text with no n-gram known to the fitted vocabulary has a zero
vector and similarity 0 to everything (itself included).
"""

from __future__ import annotations

import math
import unicodedata

import numpy as np
import torch


def _preprocess(text: str) -> str:
    """NFC-normalise and lower-case. Accents are NOT stripped: in Indic scripts the
    combining vowel signs are letters, and stripping them would merge different words."""
    return unicodedata.normalize("NFC", text).lower()


class CaptionSimilarity:
    """TF-IDF character n-gram cosine similarity, fit on the training captions."""

    def __init__(self, ngram_range: tuple[int, int] = (2, 4), min_df: int = 1):
        self.ngram_range = tuple(ngram_range)
        self.min_df = min_df
        self._vectorizer = None

    def fit(self, texts) -> CaptionSimilarity:
        """Learn the n-gram vocabulary and idf weights from ``texts``; returns ``self``."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        texts = _as_texts(texts, "fit")
        if not texts:
            raise ValueError("CaptionSimilarity.fit: no texts")
        vectorizer = TfidfVectorizer(
            analyzer="char_wb",
            ngram_range=self.ngram_range,
            min_df=self.min_df,
            preprocessor=_preprocess,
            sublinear_tf=True,
            dtype=np.float32,
        )
        try:
            vectorizer.fit(texts)
        except ValueError as error:  # e.g. every text empty
            raise ValueError(f"CaptionSimilarity.fit: {error}") from error
        self._vectorizer = vectorizer
        return self

    def transform(self, texts):
        """Sparse (n, V) float32 matrix of L2-normalised TF-IDF rows."""
        if self._vectorizer is None:
            raise RuntimeError("CaptionSimilarity: call .fit(training_captions) before use")
        return self._vectorizer.transform(_as_texts(texts, "transform"))

    def pairwise(self, texts_a, texts_b=None) -> torch.Tensor:
        """Cosine similarities ``(len(a), len(b))`` as a float32 tensor; ``b`` defaults to ``a``."""
        a = self.transform(texts_a)
        b = a if texts_b is None else self.transform(texts_b)
        sims = (a @ b.T).toarray().astype(np.float32, copy=False)
        return torch.from_numpy(np.clip(sims, 0.0, 1.0))

    def top_fraction_threshold(self, texts, fraction: float, block_rows: int = 512,
                               groups=None) -> float:
        """The similarity of the ``k``-th most similar pair of distinct ``texts``, ``k =
        floor(fraction · P)`` over all ``P = n(n-1)/2`` pairs (``inf`` when ``k == 0``);
        with ``groups`` (one id per text, e.g. its video), over the ``P`` pairs of texts of
        different groups only.

        Pairs with a similarity ``>=`` this value are (up to ties) the top ``fraction`` of all
        caption pairs: the hard-negative exclusion threshold of Galanopoulos & Mezaris (ICCV
        Workshops 2021), fixed once over the training set. Computed in row blocks of the
        upper triangle, keeping a running top ``k``, so memory stays O(block_rows · n + k).
        """
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"top_fraction_threshold: fraction must be in [0, 1), got {fraction}")
        vectors = self.transform(texts)
        n = vectors.shape[0]
        if groups is not None:
            groups = np.asarray(groups).reshape(-1)
            if groups.size != n:
                raise ValueError(f"top_fraction_threshold: {groups.size} groups for {n} texts")
            sizes = np.unique(groups, return_counts=True)[1]
            pairs = n * (n - 1) / 2 - float((sizes * (sizes - 1) / 2).sum())
        else:
            pairs = n * (n - 1) / 2
        count = math.floor(fraction * pairs + 1e-9)
        if count == 0:
            return math.inf
        top = np.empty(0, dtype=np.float32)
        for start in range(0, n, block_rows):
            stop = min(start + block_rows, n)
            block = (vectors[start:stop] @ vectors.T).toarray()
            upper = np.arange(n)[None, :] > np.arange(start, stop)[:, None]  # pairs (i, j), i < j
            if groups is not None:
                upper &= groups[None, :] != groups[start:stop, None]
            values = np.concatenate([top, block[upper].astype(np.float32)])
            top = (values if len(values) <= count
                   else np.partition(values, len(values) - count)[-count:])
        return float(np.clip(top.min(), 0.0, 1.0))


def _as_texts(texts, where: str) -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"CaptionSimilarity.{where}: expected a list of texts, got one str")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"CaptionSimilarity.{where}: text {i} is {type(text).__name__}, not str"
            )
    return texts
