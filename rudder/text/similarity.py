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

# Caption pairs up to which top_fraction_threshold is exact (about 3 s on one core, as long as
# its sampled estimate of SAMPLED_PAIRS pairs takes).
EXACT_PAIRS = 1 << 26
SAMPLED_PAIRS = 1 << 22


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
                               exact_pairs: int = EXACT_PAIRS, sampled_pairs: int = SAMPLED_PAIRS,
                               seed: int = 0, groups=None) -> float:
        """The similarity of the ``k``-th most similar pair of distinct ``texts``, ``k =
        floor(fraction · P)`` over all ``P = n(n-1)/2`` pairs (``inf`` when ``k == 0``);
        with ``groups`` (one id per text, e.g. its video), over the ``P`` pairs of texts of
        different groups only.

        Pairs with a similarity ``>=`` this value are (up to ties) the top ``fraction`` of all
        caption pairs: the hard-negative exclusion threshold of Galanopoulos & Mezaris (ICCV
        Workshops 2021), fixed once over the training set. Up to ``exact_pairs`` pairs it is
        computed exactly, in row blocks of the upper triangle keeping a running top ``k``
        (memory O(block_rows · n + k)). Past that (time O(n^2)) it is estimated from
        ``sampled_pairs`` pairs drawn uniformly with replacement (numpy generator ``seed``):
        the ``ceil(fraction · m)``-th largest of their ``m`` similarities, time O(m) whatever
        ``n``. Its error bound: the number of sampled pairs at or above the exact quantile is
        binomial (m, fraction), so the share of all pairs at or above the estimate is within
        ``4 sqrt(fraction (1 - fraction) / m) + 1/m`` of ``fraction`` but for a probability
        below 1e-4 (about 2% of ``fraction = 0.01`` at the default ``m = 2^22``); with
        ``groups``, ``m`` counts the sampled pairs of different groups.
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
            pairs = n * (n - 1) // 2 - int((sizes * (sizes - 1) // 2).sum())
        else:
            pairs = n * (n - 1) // 2
        count = math.floor(fraction * pairs + 1e-9)
        if count == 0:
            return math.inf
        if pairs > exact_pairs:
            return _sampled_threshold(vectors, fraction, sampled_pairs, seed, groups)
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


def _sampled_threshold(vectors, fraction: float, pairs: int, seed: int, groups=None) -> float:
    """:meth:`CaptionSimilarity.top_fraction_threshold` from ``pairs`` uniform random pairs of
    distinct rows of ``vectors`` (L2-normalised sparse rows), in chunks of 65,536 pairs; with
    ``groups``, the drawn pairs of one group are dropped (the rest stay uniform over the pairs
    of different groups)."""
    n = vectors.shape[0]
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n, pairs)
    second = rng.integers(0, n - 1, pairs)
    second += second >= first  # uniform over the other rows
    vectors = vectors.tocsr()
    sims = np.empty(pairs, dtype=np.float32)
    for start in range(0, pairs, 1 << 16):
        rows = slice(start, start + (1 << 16))
        both = vectors[first[rows]].multiply(vectors[second[rows]])
        sims[rows] = np.asarray(both.sum(axis=1)).reshape(-1)
    if groups is not None:
        sims = sims[groups[first] != groups[second]]
        pairs = len(sims)
        if pairs == 0:
            return math.inf
    count = max(1, math.ceil(fraction * pairs))
    return float(np.clip(np.partition(sims, pairs - count)[pairs - count], 0.0, 1.0))


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
