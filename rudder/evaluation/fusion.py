"""Late fusion of several retrieval models: rank fusion (AVG, MAX, Hybrid) and similarity sums.

"Fusion" is rudder's one word for combining trained models (``rudder.evaluate --fuse``, the
fusion rows of ``experiments``); :func:`fuse_directions` is what both call.

Source: Galanopoulos & Mezaris, "Hard-negatives or non-negatives? A hard-negative selection
strategy for cross-modal retrieval using the improved marginal ranking loss", ICCV Workshops
2021: each of Q models ranks the items of a query; the fused ranking orders items by the mean
of their Q ranks (AVG), by their best rank (MAX), or by the mean of their Q' best ranks
(Hybrid(Q'); Hybrid(1) = MAX, Hybrid(Q) = AVG).

Matrices are (queries x items), numpy or torch, all of one shape; results are numpy float64
score matrices, higher = better, so they plug into :mod:`rudder.evaluation.metrics` unchanged.
"""

from __future__ import annotations

import numpy as np

from rudder.evaluation.metrics import _BLOCK, _as_array, _check_nan

METHODS = ("avg", "max", "hybrid")  # rank fusion
FUSIONS = ("sum", *METHODS)  # what fuse_directions accepts


def _stack(sims_list) -> list[np.ndarray]:
    mats = [_as_array(s, f"sims_list[{i}]") for i, s in enumerate(sims_list)]
    for i, m in enumerate(mats):
        _check_nan(m, f"sims_list[{i}]")
    if not mats:
        raise ValueError("need at least one similarity matrix")
    for i, m in enumerate(mats[1:], start=1):
        if m.shape != mats[0].shape:
            raise ValueError(
                f"sims_list[{i}] has shape {m.shape}; sims_list[0] has {mats[0].shape}"
            )
    return mats


def rank_matrix(sims) -> np.ndarray:
    """0-based rank of every item within its query row, ties averaged (the mean of the tied
    positions, as :func:`rudder.evaluation.metrics.query_ranks`); rank 0 = most similar.

    ``scipy.stats.rankdata(-sims, method="average", axis=1) - 1``, vectorised over rows.
    Galanopoulos & Mezaris do not state a tie rule; averaging keeps fusion order-independent.
    """
    s = _as_array(sims, "sims")
    _check_nan(s, "sims")
    return _ranks(s)


def _ranks(s: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(np.negative(s), method="average", axis=1) - 1.0


def fuse_ranks(sims_list, method: str = "avg", q: int | None = None) -> np.ndarray:
    """Rank fusion of Q models (Galanopoulos & Mezaris 2021); returns scores, higher = better.

    Per query, every item gets its tie-averaged 0-based rank in each model (:func:`rank_matrix`);
    then "avg": the mean of its Q ranks; "max": its best (minimum) rank; "hybrid": the mean of
    its ``q`` best ranks (1 <= q <= Q; q = 1 is "max", q = Q is "avg").

    Ties (rudder's rule; the paper states none): MAX makes ties by construction (every model's
    first item has fused rank 0), and tie-averaged metrics would then never count a first
    place. So items equal on the fused rank are ordered by their next-best rank (the
    (k+1)-th smallest of their Q ranks, k = 1 for MAX, q for Hybrid; AVG uses all Q ranks and
    has none), then by their mean rank over the Q models; items equal on all of these stay
    tied (the metrics average them). The returned score is minus the item's position in that
    order (0 = first; equal keys share the position of the first of them), so ties are
    already broken for every consumer. AVG returns minus the mean rank.
    Rows are processed in blocks to bound memory.
    """
    if method not in METHODS:
        raise ValueError(f"unknown fusion method {method!r}; use one of {METHODS}")
    mats = _stack(sims_list)
    n_models = len(mats)
    if method == "hybrid":
        if not isinstance(q, int | np.integer) or not 1 <= q <= n_models:
            raise ValueError(
                f"hybrid fusion needs an integer q, 1 <= q <= {n_models} (models), got {q}"
            )
        keep = int(q)
    elif q is not None:
        raise ValueError(f"q is only used by method='hybrid' (got method={method!r}, q={q})")
    else:
        keep = n_models if method == "avg" else 1
    rows, cols = mats[0].shape
    out = np.empty((rows, cols))
    step = max(1, _BLOCK // max(cols * n_models, 1))
    for r0 in range(0, rows, step):
        ranks = np.stack([_ranks(m[r0 : r0 + step]) for m in mats])  # (Q, b, items)
        if keep == n_models:
            out[r0 : r0 + step] = -ranks.mean(axis=0)
            continue
        ordered = np.sort(ranks, axis=0)
        keys = (ordered[:keep].mean(axis=0), ordered[keep], ranks.mean(axis=0))
        out[r0 : r0 + step] = -_positions(keys)
    return out


def _positions(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per row, each item's 0-based position in the lexicographic order of ``keys`` (ascending;
    the first key decides first); items equal on every key share the first one's position."""
    order = np.lexsort(keys[::-1], axis=-1)  # lexsort: the last key is the primary one
    ranked = [np.take_along_axis(k, order, axis=-1) for k in keys]
    new = np.zeros(order.shape, dtype=bool)
    new[:, 0] = True
    for k in ranked:
        new[:, 1:] |= k[:, 1:] != k[:, :-1]
    index = np.broadcast_to(np.arange(order.shape[1]), order.shape)
    start = np.maximum.accumulate(np.where(new, index, 0), axis=-1)  # first of each group
    out = np.empty(order.shape)
    np.put_along_axis(out, order, start.astype(np.float64), axis=-1)
    return out


def fuse_similarities(sims_list) -> np.ndarray:
    """Similarity-level fusion: the element-wise sum of the models' matrices (as Collaborative
    Experts combines models; no per-model weighting or normalisation)."""
    mats = _stack(sims_list)
    out = mats[0].astype(np.float64)
    for m in mats[1:]:
        out += m
    return out


def fuse_directions(sims_list, query_masks, method: str = "sum", q: int | None = None):
    """Fuse Q models' caption-by-video matrices (video-major rows, docs/architecture.md) for both
    retrieval directions; returns ``(t2v scores, v2t scores or None)``, numpy float64.

    ``"sum"`` (:func:`fuse_similarities`) gives one matrix for both directions (v2t None).
    Rank fusion (``"avg"``, ``"max"``, ``"hybrid"`` with ``q``; :func:`fuse_ranks`) fuses the
    rankings of each direction's queries separately, as Galanopoulos & Mezaris fuse per query:
    t2v per caption row over the videos, v2t per video over the valid captions (the transposed
    valid rows). In the v2t matrix masked caption rows score -inf, so no video ranks them.
    """
    if method == "sum":
        if q is not None:
            raise ValueError(f"q is only used by method='hybrid' (got method='sum', q={q})")
        return fuse_similarities(sims_list), None
    valid = np.asarray(query_masks, dtype=bool).reshape(-1)
    mats = _stack(sims_list)
    rows = mats[0].shape[0]
    if len(valid) != rows:
        raise ValueError(
            f"query_masks hold {len(valid)} caption slots; the matrices have {rows} rows"
        )
    t2v = fuse_ranks(mats, method, q)
    v2t = np.full_like(t2v, -np.inf)
    v2t[valid] = fuse_ranks([m[valid].T for m in mats], method, q).T
    return t2v, v2t
