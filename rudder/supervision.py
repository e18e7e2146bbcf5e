"""Pure maths on noun/verb class sets: relevance R, partial labels, batch matrices.

Class sets are multi-hot matrices: one row per caption (or video), one column per
language-independent concept id (:class:`rudder.data.classes.ClassIndex`, which also makes
the class sets of videos); a nonzero entry means "present".
Every pairwise quantity is a matrix product of such matrices (``|A ∩ B| = A @ B.T``), so no
Python loop runs over queries or pairs. Conventions (docs/architecture.md): ``M[i, j]``
relates caption
``i`` (anchor/query) to video ``j`` (candidate); pair labels are :class:`rudder.labels.PairLabel`
(0 negative, 1 partial, 2 positive, 3 description).
"""

from __future__ import annotations

import numpy as np
import torch

from rudder.data.classes import ClassIndex, binary, video_class_sets
from rudder.devices import upload
from rudder.labels import NO_LABEL, PairLabel

# ClassIndex and video_class_sets live with the data (the loader builds class sets without
# importing supervision); they stay importable here, where the data flow of
# docs/architecture.md puts them.
__all__ = ["ClassIndex", "RelationTable", "RelevantCaptionSampler", "batch_labels",
           "batch_relevance", "description_pairs", "partial_labels", "relevance",
           "video_class_sets"]

# Output entries per row block of :func:`relevance`: bounds the sparse temporaries when
# many pairs share classes (few classes, large sets).
_BLOCK_ELEMENTS = 1 << 22


def _pair(a, b, names: tuple[str, str]) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = binary(a, names[0]), binary(b, names[1])
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{names[0]} has {a.shape[1]} classes but {names[1]} has {b.shape[1]}")
    return a, b


def _rows(a: torch.Tensor, b: torch.Tensor, names) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{names[0]} has {a.shape[0]} rows but {names[1]} has {b.shape[0]}")


def relevance(nouns_a, verbs_a, nouns_b, verbs_b) -> torch.Tensor:
    """Semantic relevance ``R[i, j]`` in [0, 1] of items ``a_i`` and ``b_j`` (float32).

    ``R = 0.5 * (IoU(V_i, V_j) + IoU(N_i, N_j))`` over verb and noun classes, ``IoU(A, B) =
    |A ∩ B| / |A ∪ B|`` and 0 when the union is empty: the semantic relevance of the
    EPIC-KITCHENS-100 multi-instance retrieval benchmark (Damen et al., "Rescaling
    Egocentric Vision", IJCV 2022, arXiv:2006.13256; ``(verb_iou + noun_iou) / 2`` over
    class sets in create_multiVNs_relevancy_files.py of aranciokov/RelevanceMargin-ICMR22),
    used for relevance-aware mining by Falcon, Serra and Lanz ("Learning video retrieval
    models with relevance-aware online mining", ICIAP 2022, arXiv:2203.08688;
    aranciokov/ranp). Empty-part rule, as that script (it sets the NaN of 0/0 to 0): a part
    of speech empty on both sides counts 0, so a verb-less listing caption reaches at most
    0.5, even against itself. A part empty on one side only has IoU 0 too.

    Inputs are multi-hot ``(na, Cn)``, ``(na, Cv)``, ``(nb, Cn)``, ``(nb, Cv)``.
    ``|A ∩ B| = A @ B.T`` is a sparse product (class sets are small), ``|A ∪ B| = |A| +
    |B| - |A ∩ B|``, and only pairs sharing a class (R > 0) are written, in row blocks
    that bound the temporaries; every other entry is 0. Computed on the CPU (scipy), returned
    on the device of ``nouns_a``.
    """
    nouns_a, nouns_b = _pair(nouns_a, nouns_b, ("nouns_a", "nouns_b"))
    verbs_a, verbs_b = _pair(verbs_a, verbs_b, ("verbs_a", "verbs_b"))
    _rows(nouns_a, verbs_a, ("nouns_a", "verbs_a"))
    _rows(nouns_b, verbs_b, ("nouns_b", "verbs_b"))
    device = nouns_a.device
    nouns_a, verbs_a, nouns_b, verbs_b = (x.cpu() for x in (nouns_a, verbs_a, nouns_b, verbs_b))
    na, nb = nouns_a.shape[0], nouns_b.shape[0]
    parts = (_SetPart(nouns_a, nouns_b), _SetPart(verbs_a, verbs_b))
    out = torch.zeros(na, nb, dtype=torch.float32)  # torch allocates big blocks faster than numpy
    out_np = out.numpy()
    step = max(1, _BLOCK_ELEMENTS // max(nb, 1))
    for start in range(0, na, step):
        rows = slice(start, min(start + step, na))
        block = out_np[rows].reshape(-1)  # a view: C-contiguous rows
        for part in parts:
            row, col, iou = part.jaccard(rows)
            block[row * nb + col] += 0.5 * iou
    return out.to(device)


class _SetPart:
    """One part of speech of :func:`relevance`: sparse sets of both sides and their sizes."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor):
        from scipy import sparse

        self.a = sparse.csr_matrix(a.numpy())
        self.b_t = sparse.csr_matrix(b.numpy()).T.tocsr()
        self.size_a, self.size_b = a.sum(1).numpy(), b.sum(1).numpy()

    def jaccard(self, rows: slice):
        """Block-local row, column and Jaccard index of every pair in ``rows`` sharing a class."""
        shared = (self.a[rows] @ self.b_t).tocoo()
        row, col = shared.row.astype(np.int64), shared.col.astype(np.int64)
        union = self.size_a[row + rows.start] + self.size_b[col] - shared.data
        return row, col, (shared.data / union).astype(np.float32)


class RelevantCaptionSampler:
    """Draws, for query captions, a caption among ``captions`` whose :func:`relevance` to the
    query exceeds ``threshold``, with probability proportional to its ``weight``: the
    distribution of ``torch.multinomial((relevance(query, captions) > threshold) * weights)``,
    without a row of relevance per query (that is ``O(N)`` per query, ``O(N^2)`` per epoch).

    Exact rejection sampling over an inverted index from classes to captions (the
    union-of-sets estimator of Karp, Luby & Madras, "Monte-Carlo approximation algorithms
    for enumeration problems", J. Algorithms 1989): a relevant caption shares a class with
    the query (``R > threshold >= 0`` needs an intersection), so a class ``c`` of the query
    is chosen with probability proportional to the weight ``M_c`` of the captions having it,
    then a caption ``k`` of ``c`` proportionally to its weight; ``k`` is proposed with
    probability ``m(k) w_k / sum_c M_c``, ``m(k)`` the number of the query's classes it has,
    and is kept with probability ``[R(query, k) > threshold] / m(k)``, which leaves
    ``P(k) = w_k [R > threshold] / sum_j w_j [R_j > threshold]``. ``R`` is computed for the
    proposed pair with :func:`relevance`'s float32 arithmetic (equal bit for bit, tested).
    A query makes 1, 2, 4, ... tries in successive rounds, the first kept one being its draw;
    queries with none kept after :data:`ROUNDS` rounds (255 tries: few relevant captions
    among many sharing a class) are drawn from all the captions sharing a class with them,
    so the draw stays exact. Preparation is linear in the class entries; a draw costs a few
    vectorised passes over the queries per round. Random numbers come from the caller's
    ``torch.Generator``.
    """

    ROUNDS = 8  # rounds of tries; round r makes 2^r tries per undecided query

    def __init__(self, nouns, verbs, weights, threshold: float):
        from scipy import sparse

        nouns, verbs = binary(nouns, "nouns"), binary(verbs, "verbs")
        _rows(nouns, verbs, ("nouns", "verbs"))
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"RelevantCaptionSampler: threshold must be in [0, 1], got "
                             f"{threshold}")
        self.nouns, self.verbs = nouns.cpu().float(), verbs.cpu().float()  # (N, C) multi-hot
        self.num_nouns = nouns.shape[1]
        self.threshold = np.float32(threshold)  # compared in float32, as relevance() > t is
        self.weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if self.weights.shape != (nouns.shape[0],) or (self.weights < 0).any():
            raise ValueError("RelevantCaptionSampler: one non-negative weight per caption")
        classes = sparse.csr_matrix(torch.cat([self.nouns, self.verbs], 1).numpy())
        self.caption_ptr, self.caption_classes = classes.indptr, classes.indices.astype(np.int64)
        self.noun_size, self.verb_size = (x.sum(1).numpy() for x in (self.nouns, self.verbs))
        by_class = classes.T.tocsr()  # class -> its captions, ascending
        self.class_ptr, self.class_captions = by_class.indptr, by_class.indices.astype(np.int64)
        self.class_cumulative = np.cumsum(self.weights[self.class_captions])  # across lists
        before = np.r_[0.0, self.class_cumulative]
        self.class_start = before[self.class_ptr[:-1]]
        self.class_mass = before[self.class_ptr[1:]] - self.class_start

    def _shared(self, query: np.ndarray, query_rows: np.ndarray, captions: np.ndarray):
        """(shared nouns, shared verbs) of query ``query_rows[i]`` (a row of the joint
        multi-hot ``query``, nouns then verbs) and caption ``captions[i]``, as float32."""
        lengths = self.caption_ptr[captions + 1] - self.caption_ptr[captions]
        pair = np.repeat(np.arange(len(captions)), lengths)
        starts = np.repeat(self.caption_ptr[captions] - np.cumsum(lengths) + lengths, lengths)
        cls = self.caption_classes[np.arange(len(pair)) + starts]
        hit = query[query_rows[pair], cls]
        verb = cls >= self.num_nouns
        return tuple(np.bincount(pair[part], weights=hit[part], minlength=len(captions))
                     .astype(np.float32) for part in (~verb, verb))

    def pair_relevance(self, query: np.ndarray, query_rows: np.ndarray, captions: np.ndarray,
                       shared=None) -> np.ndarray:
        """:func:`relevance` of query ``query_rows[i]`` (a row of the joint multi-hot
        ``query``) and caption ``captions[i]``, pair by pair, with its float32 arithmetic:
        ``fl(0.5 * fl(|A∩B| / |A∪B|))`` per part, nouns then verbs added to 0."""
        shared = self._shared(query, query_rows, captions) if shared is None else shared
        query_sizes = (query[:, : self.num_nouns].sum(1), query[:, self.num_nouns :].sum(1))
        out = np.zeros(len(captions), dtype=np.float32)
        for both, size_query, size_caption in zip(
            shared, query_sizes, (self.noun_size, self.verb_size), strict=True
        ):
            union = size_query[query_rows] + size_caption[captions] - both
            out += np.float32(0.5) * np.divide(both, union, out=np.zeros_like(out),
                                               where=both > 0)
        return out

    def draw(self, query_nouns, query_verbs, generator: torch.Generator | None = None):
        """``(picks, none)`` for ``B`` query captions (multi-hot ``(B, Cn)``, ``(B, Cv)``):
        the drawn caption of each query (int64, -1 where ``none``) and whether no caption
        passes the threshold."""
        nouns = binary(query_nouns, "query_nouns").cpu().float()
        verbs = binary(query_verbs, "query_verbs").cpu().float()
        query = torch.cat([nouns, verbs], 1).numpy()  # joint numbering: nouns, then verbs
        picks = np.full(len(query), -1, dtype=np.int64)
        query_row, query_class = np.nonzero(query > 0)  # row-major: grouped by query
        mass = self.class_mass[query_class]
        pending = np.flatnonzero(np.bincount(query_row, weights=mass, minlength=len(query)) > 0)
        for round_ in range(self.ROUNDS):
            if not pending.size:
                break
            tries = 1 << round_
            keep = np.isin(query_row, pending)
            classes, cumulative = query_class[keep], np.cumsum(mass[keep])
            first = np.searchsorted(query_row[keep], pending)
            last = np.r_[first[1:], len(classes)] - 1
            before = np.r_[0.0, cumulative][first]
            # a try: a class of the query by its captions' weight, then a caption of that
            # class by weight; the first kept try is the draw
            first, last, before, rows = (np.repeat(x, tries)
                                         for x in (first, last, before, pending))
            u = torch.rand((3, rows.size), generator=generator, dtype=torch.float64).numpy()
            at = np.searchsorted(cumulative, before + u[0] * (cumulative[last] - before), "right")
            chosen = classes[np.clip(at, first, last)]
            target = self.class_start[chosen] + u[1] * self.class_mass[chosen]
            at = np.searchsorted(self.class_cumulative, target, "right")
            caption = self.class_captions[np.clip(at, self.class_ptr[chosen],
                                                  self.class_ptr[chosen + 1] - 1)]
            shared = self._shared(query, rows, caption)
            relevant = self.pair_relevance(query, rows, caption, shared) > self.threshold
            kept = (relevant & (u[2] * (shared[0] + shared[1]) < 1.0)).reshape(-1, tries)
            done = kept.any(1)  # a try is kept with probability [R > t] / m(k)
            picks[pending[done]] = caption.reshape(-1, tries)[done, kept[done].argmax(1)]
            pending = pending[~done]
        if pending.size:
            picks[pending] = self._draw_exactly(query, pending, generator)
        return picks, picks < 0

    def _draw_exactly(self, query: np.ndarray, rows: np.ndarray, generator) -> np.ndarray:
        """The draw of the queries ``rows`` from every caption sharing a class with them
        (their relevant candidates, weighted): -1 where none is relevant."""
        local, classes = np.nonzero(query[rows] > 0)
        lengths = self.class_ptr[classes + 1] - self.class_ptr[classes]
        starts = np.repeat(self.class_ptr[classes] - np.cumsum(lengths) + lengths, lengths)
        captions = self.class_captions[np.arange(lengths.sum()) + starts]
        pairs = np.unique(np.repeat(local, lengths) * len(self.weights) + captions)
        local, captions = np.divmod(pairs, len(self.weights))
        relevant = self.pair_relevance(query, rows[local], captions) > self.threshold
        cumulative = np.cumsum(np.where(relevant, self.weights[captions], 0.0))
        ends = np.searchsorted(local, np.arange(len(rows)), "right") - 1  # last pair per row
        totals = np.r_[0.0, cumulative][ends + 1]
        before = np.r_[0.0, totals[:-1]]
        u = torch.rand(len(rows), generator=generator, dtype=torch.float64).numpy()
        at = np.searchsorted(cumulative, before + u * (totals - before), "right")
        found = totals > before
        return np.where(found, captions[np.minimum(at, len(captions) - 1)], -1)


def batch_relevance(caption_nouns, caption_verbs, video_nouns, video_verbs) -> torch.Tensor:
    """``(B, B)`` relevance of batch caption ``i`` to batch video ``j``: :func:`relevance`'s
    values, computed densely on the inputs' device (two small matrix products), so a GPU
    training step needs no trip through the CPU.

    ``R[i, i]`` is the computed relevance of a caption to its own video (docs/architecture.md's
    anchor/candidate rule).
    """
    nouns_a, nouns_b = _pair(caption_nouns, video_nouns, ("caption_nouns", "video_nouns"))
    verbs_a, verbs_b = _pair(caption_verbs, video_verbs, ("caption_verbs", "video_verbs"))
    _rows(nouns_a, verbs_a, ("caption_nouns", "caption_verbs"))
    _rows(nouns_b, verbs_b, ("video_nouns", "video_verbs"))
    if nouns_a.shape[0] != nouns_b.shape[0]:
        raise ValueError(
            f"batch_relevance: {nouns_a.shape[0]} captions but {nouns_b.shape[0]} videos")
    return 0.5 * (_dense_iou(nouns_a, nouns_b) + _dense_iou(verbs_a, verbs_b))


def _dense_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``|A_i ∩ B_j| / |A_i ∪ B_j|`` for 0/1 rows, 0 where the union is empty."""
    shared = a @ b.T
    union = a.sum(1, keepdim=True) + b.sum(1) - shared
    return torch.where(union > 0, shared / union.clamp_min(1.0), 0.0)


def partial_labels(
    nouns_q, verbs_q, nouns_c, verbs_c, alpha_n: float, alpha_v: float
) -> torch.Tensor:
    """``(nq, nc)`` int8 labels from the noun/verb partial heuristic of the RUDDER paper
    (Akula et al., "Cross Lingual Video and Text Retrieval: A New Benchmark Dataset and
    Algorithm", ICMI 2021, arXiv:2103.05457), as docs/architecture.md states it.

    ``overlap_n = |N_q ∩ N_c| / |N_q|`` and ``overlap_v`` likewise, over the parts of speech
    *present in the query*. Label 2 (positive) when every present overlap is 1; 1 (partial)
    when not positive and ``overlap_n >= alpha_n`` or ``overlap_v >= alpha_v`` (each only if
    that part is present; the boundary counts as reached) with that overlap above 0 (the
    paper's partials "lie in the overlap zone between the positives and the negatives", so
    a pair sharing no class is a negative even at an alpha of 0, where the original design's formula
    alone would make it partial); 0 otherwise. A query with neither nouns nor verbs gets
    0 everywhere. Overlaps are float32 quotients.
    """
    for name, alpha in (("alpha_n", alpha_n), ("alpha_v", alpha_v)):
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"partial_labels: {name} must be in [0, 1], got {alpha}")
    nouns_q, nouns_c = _pair(nouns_q, nouns_c, ("nouns_q", "nouns_c"))
    verbs_q, verbs_c = _pair(verbs_q, verbs_c, ("verbs_q", "verbs_c"))
    _rows(nouns_q, verbs_q, ("nouns_q", "verbs_q"))
    _rows(nouns_c, verbs_c, ("nouns_c", "verbs_c"))
    size_n, size_v = nouns_q.sum(1, keepdim=True), verbs_q.sum(1, keepdim=True)
    has_n, has_v = size_n > 0, size_v > 0
    shared_n, shared_v = nouns_q @ nouns_c.T, verbs_q @ verbs_c.T
    positive = (has_n | has_v) & (~has_n | (shared_n == size_n)) & (~has_v | (shared_v == size_v))
    partial = ((shared_n > 0) & (shared_n / size_n.clamp(min=1.0) >= alpha_n)) | (
        (shared_v > 0) & (shared_v / size_v.clamp(min=1.0) >= alpha_v)
    )
    labels = torch.full(partial.shape, PairLabel.NEGATIVE, dtype=torch.int8, device=partial.device)
    labels.masked_fill_(partial, PairLabel.PARTIAL)
    return labels.masked_fill_(positive, PairLabel.POSITIVE)


def description_pairs(kinds, nouns) -> torch.Tensor:
    """``(B, B)`` bool: the pairs RUDDER's *description* heuristic marks (label 3).

    A pair ``(i, j)`` is marked when one caption is a ``listing`` caption (it names the
    materials of a recipe) and the other a ``describing`` caption whose noun classes are
    a non-empty subset of the listing caption's: the describing caption applies materials
    the listing caption lists, RUDDER's "description" relation (an application of the
    other caption). Symmetric; the diagonal is never marked. ``kinds`` are the captions'
    ``kind`` column values (other kinds mark nothing); ``nouns`` their ``(B, C)``
    multi-hot noun classes. This rule is rudder's reading of the paper's PO(M)
    description labels (docs/fidelity.md).
    """
    nouns = binary(nouns, "nouns")
    kinds = np.asarray(list(kinds), dtype=object)
    if len(kinds) != nouns.shape[0]:
        raise ValueError(f"description_pairs: {len(kinds)} kinds but {nouns.shape[0]} noun rows")
    listing = upload(torch.from_numpy(kinds == "listing"), nouns.device)
    describing = upload(torch.from_numpy(kinds == "describing"), nouns.device)
    size = nouns.sum(1)
    covered = (nouns @ nouns.T) == size.unsqueeze(0)  # [l, d]: N_d ⊆ N_l
    applies = listing[:, None] & describing[None, :] & covered & (size > 0)[None, :]
    marked = applies | applies.T
    marked.fill_diagonal_(False)
    return marked


def batch_labels(nouns, verbs, alpha_n: float, alpha_v: float, manual=None,
                 description=None) -> torch.Tensor:
    """``(B, B)`` int8 labels of a training batch, diagonal 2.

    ``labels[i, j]`` is :func:`partial_labels` with batch caption ``i`` as query and the
    batch caption of video ``j`` (caption ``j``) as candidate. ``description`` is an
    optional ``(B, B)`` bool mask (:func:`description_pairs`) that turns heuristic
    labels 0 and 1 into 3 (a positive stays 2). ``manual`` is an optional ``(B, B)``
    matrix from :meth:`RelationTable.lookup`: entries >= 0 (manual labels 0..3) replace
    both, -1 keeps them. The diagonal is set to 2 last (a batch holds each video once, so
    caption ``i``'s own video is its one certain positive).
    """
    labels = partial_labels(nouns, verbs, nouns, verbs, alpha_n, alpha_v)
    if description is not None:
        description = torch.as_tensor(description, dtype=torch.bool)
        _same_shape(description, labels, "description")
        marked = upload(description, labels.device) & (labels < PairLabel.POSITIVE)
        labels = torch.where(marked, PairLabel.DESCRIPTION, labels).to(torch.int8)
    if manual is not None:
        manual = torch.as_tensor(manual)
        _same_shape(manual, labels, "manual")
        _check_manual(manual)
        manual = upload(manual, labels.device)
        labels = torch.where(manual != NO_LABEL, manual.to(torch.int8), labels)
    labels.fill_diagonal_(PairLabel.POSITIVE)
    return labels


def _check_manual(manual: torch.Tensor) -> None:
    """Manual labels are -1 (unknown) or 0..3; a host matrix (what
    :meth:`RelationTable.lookup` gives) is checked in numpy, so no device is waited for."""
    values = manual.numpy() if manual.device.type == "cpu" else manual
    if manual.numel() and (int(values.min()) < NO_LABEL or int(values.max()) > max(PairLabel)):
        raise ValueError("batch_labels: manual labels must be -1 (unknown) or 0..3")


def _same_shape(value: torch.Tensor, labels: torch.Tensor, name: str) -> None:
    if value.shape != labels.shape:
        raise ValueError(
            f"batch_labels: {name} has shape {tuple(value.shape)}, expected {tuple(labels.shape)}"
        )


class RelationTable:
    """Manually labelled caption pairs, looked up as batch matrices.

    ``caption_ids`` fixes the caption positions; ``relations`` is a table with columns
    ``caption_id_a``, ``caption_id_b``, ``label`` (docs/architecture.md's relations config, labels
    0..3). A row labels caption ``b`` as a candidate for the query ``a``, as pair labels
    are read (docs/architecture.md): RUDDER's noun/verb and video heuristics are asymmetric, so
    ``(a, b)`` and ``(b, a)`` may differ. A pair listed in one direction only takes its
    label both ways (an annotator's relation for the pair). Rows are stored as sorted int64
    keys ``a * n + b`` and found with ``np.searchsorted``. Rows naming a caption outside
    ``caption_ids`` (another split) are skipped and counted in ``.skipped``. The same
    ordered pair listed twice with different labels is an error (resolve annotator
    disagreements when importing).
    """

    def __init__(self, caption_ids, relations):
        caption_ids = np.asarray(list(caption_ids), dtype=str)
        if len(np.unique(caption_ids)) != len(caption_ids):
            raise ValueError("RelationTable: caption_ids has duplicates")
        self._order = np.argsort(caption_ids, kind="stable")
        self._sorted_ids = caption_ids[self._order]
        self.num_captions = len(caption_ids)
        missing = {"caption_id_a", "caption_id_b", "label"} - set(relations.column_names)
        if missing:
            raise ValueError(f"RelationTable: relations table lacks column(s) {sorted(missing)}")
        for name in ("caption_id_a", "caption_id_b", "label"):
            if relations.column(name).null_count:
                raise ValueError(f"RelationTable: relations column {name!r} has null values")
        ids_a = np.asarray(relations.column("caption_id_a").to_pylist(), dtype=str)
        ids_b = np.asarray(relations.column("caption_id_b").to_pylist(), dtype=str)
        labels = np.asarray(relations.column("label").to_pylist(), dtype=np.int64)
        outside = (labels < min(PairLabel)) | (labels > max(PairLabel))
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise ValueError(f"RelationTable: relations row {row}: label {labels[row]} not in 0..3")
        pos_a, pos_b = self.positions(ids_a), self.positions(ids_b)
        keep = (pos_a >= 0) & (pos_b >= 0)
        self.skipped = int((~keep).sum())
        keys = self._keys(pos_a[keep], pos_b[keep])
        labels = labels[keep]
        order = np.lexsort((labels, keys))
        keys, labels = keys[order], labels[order]
        unique, first = np.unique(keys, return_index=True)
        conflict = np.flatnonzero((keys[1:] == keys[:-1]) & (labels[1:] != labels[:-1]))
        if conflict.size:
            both = conflict[:1] + np.array([0, 1])
            key = int(keys[both[0]])
            a, b = self._id_of(key // self.num_captions), self._id_of(key % self.num_captions)
            rows = np.flatnonzero(keep)[order][both]
            names = (relations.column("annotator").take(rows).to_pylist()
                     if "annotator" in relations.column_names else ["", ""])
            listed = " and ".join(f"row {r}" + (f" ({n})" if n else "") + f" label {x}"
                                  for r, n, x in zip(rows, names, labels[both], strict=True))
            raise ValueError(
                f"RelationTable: the relations table (the dataset's relations/all.parquet) gives "
                f"the pair (query {a}, candidate {b}) different labels: {listed}; keep one row "
                "per ordered pair (python -m heuristics import-relations --resolve majority or "
                "--resolve annotator:NAME writes one)")
        self._keys_sorted = unique
        self._labels = labels[first].astype(np.int8)

    def __len__(self) -> int:
        return len(self._keys_sorted)

    def _id_of(self, position: int) -> str:
        return str(self._sorted_ids[np.flatnonzero(self._order == position)[0]])

    def positions(self, ids) -> np.ndarray:
        """Positions of ``ids`` in ``caption_ids`` (int64), -1 for unknown ids."""
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=str)
        if self.num_captions == 0 or ids.size == 0:
            return np.full(ids.shape, -1, dtype=np.int64)
        where = np.searchsorted(self._sorted_ids, ids).clip(max=self.num_captions - 1)
        found = self._sorted_ids[where] == ids
        return np.where(found, self._order[where], -1).astype(np.int64)

    def _keys(self, pos_a: np.ndarray, pos_b: np.ndarray) -> np.ndarray:
        return pos_a * np.int64(self.num_captions) + pos_b

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every related caption pair once, whatever its directions: caption positions
        ``(low, high)`` with ``low < high``."""
        n = np.int64(max(self.num_captions, 1))
        query, candidate = self._keys_sorted // n, self._keys_sorted % n
        unique = np.unique(np.minimum(query, candidate) * n + np.maximum(query, candidate))
        return unique // n, unique % n

    def _find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found, index into the stored rows) of ordered ``keys``."""
        if not len(self._keys_sorted):
            return np.zeros(keys.shape, dtype=bool), np.zeros(keys.shape, dtype=np.int64)
        where = np.searchsorted(self._keys_sorted, keys).clip(max=len(self._keys_sorted) - 1)
        return self._keys_sorted[where] == keys, where

    def lookup_positions(self, pos_a, pos_b) -> torch.Tensor:
        """``(len(a), len(b))`` int8 labels of candidate ``b`` for query ``a`` (caption
        positions): the row ``(a, b)``, else the row ``(b, a)``, else -1."""
        pos_a = np.asarray(pos_a, dtype=np.int64)[:, None]
        pos_b = np.asarray(pos_b, dtype=np.int64)[None, :]
        known = (pos_a >= 0) & (pos_b >= 0)
        found, where = self._find(self._keys(pos_a, pos_b))
        found_reverse, where_reverse = self._find(self._keys(pos_b, pos_a))
        out = np.full(found.shape, NO_LABEL, dtype=np.int8)
        reverse = known & found_reverse & ~found
        out[reverse] = self._labels[where_reverse[reverse]]
        direct = known & found
        out[direct] = self._labels[where[direct]]
        return torch.from_numpy(out)

    def lookup(self, caption_ids_a, caption_ids_b=None) -> torch.Tensor:
        """``(len(a), len(b))`` int8 manual labels of candidate ``b`` for query ``a``, -1
        where unknown; ``b`` defaults to ``a``. Symmetric unless a pair is listed in both
        directions with different labels."""
        pos_a = self.positions(caption_ids_a)
        pos_b = pos_a if caption_ids_b is None else self.positions(caption_ids_b)
        return self.lookup_positions(pos_a, pos_b)
