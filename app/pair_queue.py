"""Which caption pairs to label first: candidate queues over a dataset's training captions.

A queue lists ``(query, candidate)`` caption pairs in the order annotators should label them.
Its *universe* is every pair of training-split captions of two different videos in the
model's caption languages: only such pairs reach a training batch (a label of a validation
or test caption never trains anything; those are labelled query by query). Three strategies:

``heuristic``
    Today's query-by-query order: queries in dataset order, each followed by its first
    ``limit`` candidates in its own language, ordered by the noun/verb heuristic label
    (positive, partial, negative), then the relevance R, then dataset order
    (:class:`app.candidates.CandidateRanker`).
``random``
    Pairs drawn uniformly from the universe (a fixed seed), the passive-learning baseline.
``model-disagreement``
    Uncertainty sampling (D. Lewis and W. Gale, "A Sequential Algorithm for Training Text
    Classifiers", SIGIR 1994: label the examples the current classifier is least sure
    about), adapted to ranking as in P. Donmez and J. Carbonell, "Optimizing Estimated Loss
    Reduction for Active Sampling in Rank Learning" (ICML 2008): prefer the pairs whose label
    would move the trained ranking most. A manual label changes training only where it
    differs from the heuristic label that PO otherwise uses, so each pair's value is the
    mean of three estimates in [0, 1] of how doubtful its heuristic label is:

    * *model disagreement*: the current model ranks the training videos for the query
      caption, and a candidate takes its video's rank. For a pair the heuristic calls
      negative: the share of the query's partial and positive candidates that the model
      ranks below it (the model ranks it high); for a positive: the share of its negative and
      partial candidates ranked above it (the model ranks it low); 0 for a partial, which
      the heuristic places between the two on purpose (its doubt is the next two terms').
    * *partial boundary* ``max_part 1 - |o - alpha| / max(alpha, 1 - alpha)`` over the parts
      of speech the query has and the candidate shares (``o``: the share of the query's noun
      or verb classes the candidate has, ``alpha``: ``alpha_n`` or ``alpha_v``; a part
      sharing nothing gives 0): 1 at the threshold, where one tagging error flips the label.
    * *label uncertainty* ``1 - max_k f_k``: ``f_k`` is the share of the candidate segment's
      captions in the universe (its translations) whose heuristic label against the query is
      ``k``; 0 when the translations agree.

    Each query keeps its ``limit`` most valuable candidates. For diversity (the concern of
    K. Brinker, "Incorporating Diversity in Active Learning with Support Vector Machines",
    ICML 2003, and of maximal marginal relevance, J. Carbonell and J. Goldstein, SIGIR 1998)
    the pool is then served round-robin over query videos (:func:`diverse_order`): every
    video's captions contribute their most valuable pair before any video contributes a
    second, and within one query video a candidate video is repeated only after every other
    candidate video of its list has come; so one query cannot absorb the budget.

Everything is computed in blocks of queries with matrix products (no loop over pairs); every
training pair is scored, so the time grows with the square of the training captions: about
30 s for the sample's 8,145 on 2 cores (docs/app.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from rudder.data.classes import ClassIndex
from rudder.supervision import partial_labels, relevance

from .collection import Collection

STRATEGIES = ("model-disagreement", "heuristic", "random")
BLOCK_PAIRS = 1 << 22  # pairs scored at once


class QueueError(ValueError):
    """A queue that cannot be built for this dataset; the message says what to do."""


@dataclass
class PairQueue:
    """One strategy's pairs, first to label first: rows of ``collection.captions``.

    ``value`` is the model-disagreement value (NaN for the other strategies); ``heuristic``
    the heuristic label (0-2) and ``model_rank`` the model's rank of the candidate's video
    among the training videos (0 when no model was used).
    """

    strategy: str
    a: np.ndarray
    b: np.ndarray
    value: np.ndarray
    heuristic: np.ndarray
    model_rank: np.ndarray

    def __len__(self) -> int:
        return len(self.a)


class QueueBuilder:
    """Queues over the training captions of ``collection`` in ``languages`` (default: all).

    Needs noun/verb classes (``noun_classes``/``verb_classes``) or lemmas (``nouns``/
    ``verbs``, same-language matches only) for ``heuristic`` and ``model-disagreement``.
    """

    def __init__(
        self,
        collection: Collection,
        languages=None,
        alpha_n: float = 0.5,
        alpha_v: float = 0.5,
        limit: int = 20,
        split: str = "train",
        block: int | None = None,
    ):
        captions = collection.captions
        keep = captions["split"].to_numpy() == split
        if languages is not None:
            keep &= captions["lang"].isin(list(languages)).to_numpy()
        self.collection = collection
        self.rows = np.flatnonzero(keep)
        if len(self.rows) == 0:
            raise QueueError(
                f"{collection.name} has no {split} captions in {', '.join(languages or [])}: "
                "the queue lists training pairs only; label query by query instead"
            )
        self.alpha_n, self.alpha_v, self.limit = alpha_n, alpha_v, limit
        # queries per block: about 4 M pairs (tens of MB per array) whatever the dataset
        self.block = block or int(np.clip(BLOCK_PAIRS // len(self.rows), 1, 512))
        table = captions.iloc[self.rows]
        self.video = pd.factorize(table["video_id"])[0]
        self.video_ids = table["video_id"].to_numpy()
        self.lang = pd.factorize(table["lang"])[0]
        self.segment = pd.factorize(
            pd.MultiIndex.from_arrays([table["video_id"], table["start"], table["end"]])
        )[0]
        if {"noun_classes", "verb_classes"} <= set(captions.columns):
            columns = ("noun_classes", "verb_classes")
        elif {"nouns", "verbs"} <= set(captions.columns):
            columns = ("nouns", "verbs")
        else:
            columns = None
        self.nouns: torch.Tensor | None = None
        self.verbs: torch.Tensor | None = None
        if columns is not None:
            nouns, verbs = (table[c].tolist() for c in columns)
            index = ClassIndex.build(nouns, verbs)
            self.nouns, self.verbs = index.multi_hot(nouns), index.multi_hot(verbs)

    # ------------------------------------------------------------ pieces
    def labels(self, queries: np.ndarray) -> np.ndarray:
        """Heuristic labels ``(len(queries), n)`` of universe positions ``queries`` against
        every universe caption (:func:`rudder.supervision.partial_labels`)."""
        nouns, verbs = _classes(self, "heuristic")
        q = torch.from_numpy(queries)
        return partial_labels(nouns[q], verbs[q], nouns, verbs,
                              self.alpha_n, self.alpha_v).numpy()

    def boundary(self, queries: np.ndarray) -> np.ndarray:
        """The partial-boundary closeness (module docstring) of ``queries`` against all."""
        out = np.zeros((len(queries), len(self.rows)), dtype=np.float32)
        nouns, verbs = _classes(self, "model-disagreement")
        q = torch.from_numpy(queries)
        for part, alpha in ((nouns, self.alpha_n), (verbs, self.alpha_v)):
            size = part[q].sum(1, keepdim=True)
            shared = (part[q] @ part.T).numpy()
            overlap = shared / np.maximum(size.numpy(), 1.0)
            close = 1.0 - np.abs(overlap - alpha) / max(alpha, 1.0 - alpha)
            out = np.maximum(out, np.where(shared > 0, close, 0.0))
        return out

    def uncertainty(self, labels: np.ndarray) -> np.ndarray:
        """``1 - max_k f_k`` over each candidate's segment translations (module docstring)."""
        from scipy import sparse

        n, segments = len(self.rows), self.segment
        incidence = sparse.csr_matrix(
            (np.ones(n, dtype=np.float32), (np.arange(n), segments)))  # caption -> segment
        sizes = np.asarray(incidence.sum(0)).ravel()
        share = np.zeros(labels.shape, dtype=np.float32)
        for label in range(3):
            per_segment = (incidence.T @ (labels == label).T.astype(np.float32)).T
            share = np.maximum(share, per_segment[:, segments] / sizes[segments])
        return 1.0 - share

    def _other_video(self, queries: np.ndarray) -> np.ndarray:
        return self.video[queries][:, None] != self.video[None, :]

    # -------------------------------------------------------- strategies
    def heuristic(self) -> PairQueue:
        """Today's query-by-query order over the universe (module docstring)."""
        nouns, verbs = _classes(self, "heuristic")
        a_parts, b_parts, label_parts = [], [], []
        for start in range(0, len(self.rows), self.block):
            queries = np.arange(start, min(start + self.block, len(self.rows)))
            labels = self.labels(queries)
            q = torch.from_numpy(queries)
            rel = relevance(nouns[q], verbs[q], nouns, verbs).numpy()
            eligible = self._other_video(queries) & (self.lang[queries][:, None] == self.lang)
            key = np.where(eligible, -(4.0 * labels + rel), np.inf)
            order = np.argsort(key, axis=1, kind="stable")[:, : self.limit]
            taken = np.take_along_axis(eligible, order, axis=1)
            a_parts.append(np.repeat(queries, taken.sum(1)))
            b_parts.append(order[taken])
            label_parts.append(np.take_along_axis(labels, order, axis=1)[taken])
        a, b = np.concatenate(a_parts), np.concatenate(b_parts)
        return PairQueue("heuristic", self.rows[a], self.rows[b], np.full(len(a), np.nan),
                         np.concatenate(label_parts).astype(np.int8), np.zeros(len(a), np.int32))

    def random(self, size: int | None = None, seed: int = 0) -> PairQueue:
        """``size`` distinct pairs drawn uniformly from the universe (default: as many as a
        model queue holds, ``limit`` per query)."""
        n = len(self.rows)
        size = min(size or n * self.limit, n * n)
        rng = np.random.default_rng(seed)
        keys = np.zeros(0, dtype=np.int64)
        while len(keys) < size:
            draw = rng.integers(0, n * n, size=2 * (size - len(keys)) + 16, dtype=np.int64)
            draw = draw[self.video[draw // n] != self.video[draw % n]]
            _, first = np.unique(np.concatenate([keys, draw]), return_index=True)
            keys = np.concatenate([keys, draw])[np.sort(first)]
        keys = keys[:size]
        a, b = keys // n, keys % n
        heuristic = np.zeros(len(a), np.int8)
        if self.nouns is not None and self.verbs is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            for part in range(0, len(a), 65536):
                one = slice(part, part + 65536)
                heuristic[one] = _pair_labels(self.nouns, self.verbs, self.alpha_n,
                                              self.alpha_v, ta[one], tb[one])
        return PairQueue("random", self.rows[a], self.rows[b], np.full(len(a), np.nan),
                         heuristic, np.zeros(len(a), np.int32))

    def model_disagreement(self, scores: np.ndarray, score_videos) -> PairQueue:
        """The model-disagreement queue (module docstring). ``scores`` are the model's
        similarities ``(n, V)`` of every universe caption (in :attr:`rows` order) to the
        videos ``score_videos``; only the training videos among them are ranked."""
        _classes(self, "model-disagreement")
        ranks = self.video_ranks(scores, score_videos)
        parts = []
        for start in range(0, len(self.rows), self.block):
            queries = np.arange(start, min(start + self.block, len(self.rows)))
            labels = self.labels(queries)
            rank = ranks[queries][:, self.video]  # rank of each candidate's video, 1 = top
            other = self._other_video(queries)
            value = (self.disagreement(labels, ranks[queries], other) + self.boundary(queries)
                     + self.uncertainty(labels)) / 3.0
            value = np.where(other, value, -np.inf)
            keep = min(self.limit, value.shape[1])
            top = np.argpartition(-value, keep - 1, axis=1)[:, :keep]
            chosen = np.take_along_axis(value, top, axis=1)
            valid = np.isfinite(chosen)
            parts.append((np.repeat(queries, valid.sum(1)), top[valid], chosen[valid],
                          np.take_along_axis(labels, top, axis=1)[valid],
                          np.take_along_axis(rank, top, axis=1)[valid]))
        a, b, value, heuristic, rank = (np.concatenate(p) for p in zip(*parts, strict=True))
        order = diverse_order(self.video[a], self.video[b], value)
        return PairQueue("model-disagreement", self.rows[a[order]], self.rows[b[order]],
                         value[order], heuristic[order].astype(np.int8),
                         rank[order].astype(np.int32))

    def disagreement(self, labels: np.ndarray, video_rank: np.ndarray,
                     eligible: np.ndarray) -> np.ndarray:
        """Per pair, how far the model's ranking contradicts a heuristic negative or positive
        (module docstring): for a negative, the share of the query's partial and positive
        candidates the model ranks below it; for a positive, the share of its negative and
        partial candidates ranked above it; 0 for a partial, whose doubt is the boundary's.
        Candidates of one video share its rank and count half. ``labels`` and ``eligible``
        are ``(queries, candidates)``; ``video_rank`` is ``(queries, videos)`` (1 = the
        model's best)."""
        from scipy import sparse

        n = len(self.rows)
        by_video = sparse.csr_matrix((np.ones(n, dtype=np.float32), (np.arange(n), self.video)))
        order = np.argsort(video_rank, axis=1)  # videos best first

        def ranked_above(hit):
            """(count ranked above the candidate's video + half the count at it, total)."""
            at = np.asarray((by_video.T @ hit.T.astype(np.float32)).T)  # (queries, videos)
            ranked = np.take_along_axis(at, order, axis=1)
            better = np.empty_like(at)
            np.put_along_axis(better, order, np.cumsum(ranked, axis=1) - 0.5 * ranked, axis=1)
            return better[:, self.video], at.sum(1, keepdims=True)

        above, relevant = ranked_above((labels >= 1) & eligible)
        beaten = (relevant - above) / np.maximum(relevant, 1)  # relevant ones below a negative
        above, lower = ranked_above((labels <= 1) & eligible)
        passed = above / np.maximum(lower, 1)  # negatives and partials above a positive
        return np.select([labels == 0, labels == 2], [beaten, passed], 0.0).astype(np.float32)

    def video_ranks(self, scores: np.ndarray, score_videos) -> np.ndarray:
        """``(n, V_train)`` rank (1 = the model's best) of each universe video for each
        universe caption, columns in :attr:`video` code order."""
        scores = np.asarray(scores, dtype=np.float32)
        if scores.shape[0] != len(self.rows):
            raise QueueError(f"model scores have {scores.shape[0]} rows for {len(self.rows)} "
                             "queue captions")
        column = pd.Index(list(score_videos))
        videos = pd.unique(self.video_ids)  # code order of pd.factorize
        where = column.get_indexer(videos)
        if (where < 0).any():
            missing = videos[where < 0][0]
            raise QueueError(f"the model's index has no video {missing!r}: was it built on "
                             "another dataset?")
        mine = scores[:, where]
        order = np.argsort(-mine, axis=1, kind="stable")
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(1, mine.shape[1] + 1)[None, :], axis=1)
        return ranks.astype(np.int32)


def _classes(builder: QueueBuilder, strategy: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The builder's noun and verb multi-hots, which the ``strategy`` queue needs."""
    if builder.nouns is None or builder.verbs is None:
        raise QueueError(
            f"the {strategy} queue needs noun/verb columns, which {builder.collection.name} "
            "lacks; add them with `python -m heuristics label --dataset DIR`, or use the "
            "random queue"
        )
    return builder.nouns, builder.verbs


def _pair_labels(nouns: torch.Tensor, verbs: torch.Tensor, alpha_n: float, alpha_v: float,
                 a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """Heuristic labels of the pairs ``(a[i], b[i])`` (universe positions) of the noun and
    verb multi-hots, one per pair: :func:`rudder.supervision.partial_labels`' rule on
    row-wise products."""
    nq, vq, nc, vc = nouns[a], verbs[a], nouns[b], verbs[b]
    size_n, size_v = nq.sum(1), vq.sum(1)
    shared_n, shared_v = (nq * nc).sum(1), (vq * vc).sum(1)
    has_n, has_v = size_n > 0, size_v > 0
    positive = (has_n | has_v) & (~has_n | (shared_n == size_n)) & (~has_v | (shared_v == size_v))
    partial = ((shared_n > 0) & (shared_n / size_n.clamp(min=1.0) >= alpha_n)) | (
        (shared_v > 0) & (shared_v / size_v.clamp(min=1.0) >= alpha_v))
    return torch.where(positive, 2, torch.where(partial, 1, 0)).numpy().astype(np.int8)


def diverse_order(query_group: np.ndarray, candidate_group: np.ndarray,
                  value: np.ndarray) -> np.ndarray:
    """The round-robin order of the module docstring, as indices into the inputs.

    Each query group (video) lists its pairs by value, a candidate group it has not used yet
    before one it has (so one query video goes through different candidate videos first);
    a pair's round is its place in its query group's list. The order is by round, then by
    value (ties: input order).
    """
    by_value = np.argsort(-np.asarray(value), kind="stable")
    frame = pd.DataFrame({"q": query_group[by_value], "c": candidate_group[by_value],
                          "place": np.arange(len(by_value))})
    frame["repeat"] = frame.groupby(["q", "c"]).cumcount()
    frame = frame.sort_values(["q", "repeat", "place"], kind="stable")
    frame["round"] = frame.groupby("q").cumcount()
    frame = frame.sort_values(["round", "place"], kind="stable")
    return by_value[frame["place"].to_numpy()]


def model_scores(engine, builder: QueueBuilder, chunk: int = 1024) -> tuple[np.ndarray, list]:
    """The similarities ``(n, V)`` of every queue caption of ``builder`` to every video of
    ``engine``'s index (:meth:`app.engine.SearchEngine.embed_texts`, then
    :meth:`rudder.search.index.VideoIndex.scores`, in chunks of ``chunk`` captions), and the
    index's video ids."""
    captions = builder.collection.captions.iloc[builder.rows]
    texts, langs = captions["text"].tolist(), captions["lang"].tolist()
    out = np.empty((len(texts), len(engine.index)), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(texts), chunk):
            stop = start + chunk
            emb, logits = engine.embed_texts(texts[start:stop], langs[start:stop])
            out[start:stop] = engine.index.scores(emb, logits).numpy()
    return out, list(engine.index.video_ids)
