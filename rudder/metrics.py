"""Retrieval metrics: R@K, MdR, MnR, nDCG, mAP, bootstrap intervals and the Wilcoxon test.

Conventions (DESIGN.md): ``sims[i, j]`` is the similarity of caption ``i`` and video ``j``;
with K captions per video the rows are video-major (row ``r`` is caption ``r % K`` of video
``r // K``) and ``query_masks`` has shape ``(num_videos, K)``. Inputs may be numpy arrays or
torch tensors (converted to numpy; float16/bfloat16 widened losslessly to float32, integers
and booleans to float64). NaN similarities are rejected.

Every computation is vectorised over queries; large matrices are processed in blocks of
rows (or columns) of about ``_BLOCK`` elements to bound memory, never one query at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

RECALL_KS = (1, 5, 10, 50)
RANK_STATISTICS = (*(f"R{k}" for k in RECALL_KS), "MdR", "MnR", "geometric_mean")
_BLOCK = 1 << 22  # elements per processing block (16 MB of float32)


# ----------------------------------------------------------------------------- inputs
def _as_array(x, name: str) -> np.ndarray:
    """``x`` (numpy or torch) as a 2-D numpy float array (NaN is checked by ``_check_nan``)."""
    if type(x).__module__.split(".")[0] == "torch":
        import torch

        x = x.detach().cpu()
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()
        x = x.numpy()
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {arr.shape}")
    if arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    elif not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def _check_nan(arr: np.ndarray, name: str, rows: np.ndarray | None = None) -> None:
    """Reject NaN in the given rows (default all; masked rows may hold anything), blockwise."""
    rows = np.arange(arr.shape[0]) if rows is None else rows
    step = max(1, _BLOCK // max(arr.shape[1], 1))
    for i in range(0, rows.size, step):
        bad = np.isnan(arr[rows[i : i + step]])
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise ValueError(
                f"{name} has NaN at row {rows[i + r]}, column {c}; fix the model output or "
                "mask that query"
            )


def _mask_array(query_masks) -> np.ndarray:
    """``query_masks`` (numpy, torch or nested lists of 0/1 or booleans) as a bool array."""
    if type(query_masks).__module__.split(".")[0] == "torch":
        query_masks = query_masks.detach().cpu().numpy()
    qm = np.asarray(query_masks)
    if not np.isin(qm, (0, 1)).all():
        raise ValueError("query_masks must hold only 0/1 (or booleans)")
    return qm.astype(bool)


def _caption_validity(query_masks, rows: int, cols: int) -> tuple[np.ndarray, int]:
    """(valid row flags (rows,), K) from DESIGN.md's ``query_masks`` of shape (num_videos, K)."""
    if query_masks is None:
        if cols == 0 or rows % cols:
            raise ValueError(
                f"sims has {rows} rows and {cols} columns: rows must be num_videos * K "
                "(video-major); pass query_masks of shape (num_videos, K) for missing captions"
            )
        return np.ones(rows, dtype=bool), rows // cols
    qm = _mask_array(query_masks)
    if qm.ndim != 2 or qm.shape[0] != cols or qm.size != rows:
        raise ValueError(
            f"query_masks has shape {qm.shape}; expected (num_videos, K) with num_videos = "
            f"{cols} and num_videos * K = {rows} (sims has shape ({rows}, {cols}))"
        )
    return qm.reshape(-1), qm.shape[1]


def _row_mask(query_masks, rows: int) -> np.ndarray:
    """A boolean flag per query row for nDCG/mAP (shape (rows,) or any shape of that size)."""
    if query_masks is None:
        return np.ones(rows, dtype=bool)
    qm = _mask_array(query_masks)
    if qm.size != rows:
        raise ValueError(f"query_masks has {qm.size} entries; expected one per row ({rows})")
    return qm.reshape(-1)


# ----------------------------------------------------------------------------- ranks
def _tie_averaged_counts(block: np.ndarray, pos: np.ndarray, axis: int) -> np.ndarray:
    """#(block > pos) + (#(block == pos) - 1) / 2 along ``axis``: the 0-based mean tied position."""
    return (
        np.count_nonzero(block > pos, axis=axis)
        + (np.count_nonzero(block == pos, axis=axis) - 1) / 2
    )


def query_ranks(sims, query_masks=None, direction: str = "t2v") -> np.ndarray:
    """0-based, tie-averaged rank of the ground truth of every query.

    Source: Collaborative Experts' evaluation code (``model/metric.py``: ``t2v_metrics``,
    ``v2t_metrics``), with one deliberate change: CE takes the *first* tied position, here a
    tie counts as the mean of the tied positions, ``#(greater) + (#(equal) - 1) / 2``, so a
    constant matrix with N videos ranks every query at (N - 1) / 2.

    t2v: every valid caption row is a query over all videos; returns shape (rows,).
    v2t: each valid caption is ranked within its own video's column among all valid captions;
    a video's rank is the minimum over its valid captions (CE / VSE), i.e. the rank of its
    best-scoring valid caption; returns (num_videos,).
    Masked captions and videos without a valid caption get NaN (aligned for saving and
    comparing runs); masked caption rows are also left out of the v2t gallery.
    """
    if direction not in ("t2v", "v2t"):
        raise ValueError(f"direction must be 't2v' or 'v2t', got {direction!r}")
    s = _as_array(sims, "sims")
    rows, cols = s.shape
    valid, k = _caption_validity(query_masks, rows, cols)
    vr = np.flatnonzero(valid)
    _check_nan(s, "sims", vr)
    owner = vr // k
    dense = bool(valid.all())
    if direction == "t2v":
        out = np.full(rows, np.nan)
        step = max(1, _BLOCK // max(cols, 1))
        for i in range(0, vr.size, step):
            idx = vr[i : i + step]
            block = s[idx[0] : idx[-1] + 1] if dense else s[idx]
            pos = block[np.arange(idx.size), owner[i : i + step]][:, None]
            out[idx] = _tie_averaged_counts(block, pos, axis=1)
        return out
    out = np.full(cols, np.nan)
    if vr.size == 0:
        return out
    # min over a video's captions of their ranks = the rank of its best-scoring caption, since
    # the tie-averaged rank strictly decreases with the score: one comparison pass per column.
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    videos = owner[starts]
    best = np.maximum.reduceat(s[vr, owner], starts)
    step = max(1, _BLOCK // vr.size)
    for j in range(0, videos.size, step):
        vids = videos[j : j + step]
        block = s[:, vids[0] : vids[-1] + 1] if dense else s[np.ix_(vr, vids)]
        out[vids] = _tie_averaged_counts(block, best[None, j : j + step], axis=0)
    return out


# ----------------------------------------------------------------------------- statistics
def rank_statistic(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Vectorised statistic over the last axis of a (..., n) array of 0-based ranks."""
    if name in {f"R{k}" for k in RECALL_KS}:
        cut = int(name[1:])
        return lambda r: 100.0 * np.mean(r < cut, axis=-1)
    if name == "MdR":
        return lambda r: np.median(r, axis=-1) + 1
    if name == "MnR":
        return lambda r: np.mean(r, axis=-1) + 1
    if name == "geometric_mean":

        def gmean(r):
            rk = np.stack([100.0 * np.mean(r < c, axis=-1) for c in (1, 5, 10)])
            return np.where(
                (rk > 0).all(axis=0), np.exp(np.log(np.maximum(rk, 1e-300)).mean(axis=0)), 0.0
            )

        return gmean
    if name == "mean":
        return lambda v: np.mean(v, axis=-1)
    raise ValueError(
        f"unknown statistic {name!r}; use one of {(*RANK_STATISTICS, 'mean')} or a callable"
    )


def metrics_from_ranks(ranks) -> dict[str, float]:
    """R1, R5, R10, R50 (percent of queries with rank < K), MdR, MnR (median, mean of rank + 1)
    and geometric_mean = gmean(R1, R5, R10) (0 if any is 0), as in Collaborative Experts'
    ``cols2metrics`` (there as fractions; here in percent). NaN ranks (masked queries) are
    left out."""
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    r = r[~np.isnan(r)]
    if r.size == 0:
        raise ValueError("no valid queries: every query is masked")
    return {name: float(rank_statistic(name)(r)) for name in RANK_STATISTICS}


def retrieval_metrics(sims, query_masks=None, direction: str = "t2v") -> dict[str, float]:
    """DESIGN.md's R@K / MdR / MnR / geometric mean for one direction.

    ``metrics_from_ranks(query_ranks(sims, query_masks, direction))``: Collaborative Experts'
    evaluation (t2v over all videos; v2t takes a video's best valid caption among all valid
    captions) with tie-averaged 0-based ranks; see :func:`query_ranks`.
    """
    return metrics_from_ranks(query_ranks(sims, query_masks, direction))


def per_language_metrics(sims, caption_langs, query_masks=None) -> dict[str, dict[str, float]]:
    """t2v metrics of the valid queries of each caption language (ranks over all videos).

    ``caption_langs`` holds one ISO 639-1 code per row (any shape of ``rows`` entries, e.g.
    (num_videos, K)); entries of masked rows are ignored. Same conventions as
    :func:`retrieval_metrics` (Collaborative Experts' t2v, tie-averaged ranks).
    """
    from rudder.languages import SUPPORTED, check_language

    ranks = query_ranks(sims, query_masks, "t2v")
    langs = np.asarray(caption_langs, dtype=object).reshape(-1)
    if langs.size != ranks.size:
        raise ValueError(
            f"caption_langs has {langs.size} entries; expected one per sims row ({ranks.size})"
        )
    valid = ~np.isnan(ranks)
    codes, first = np.unique(langs[valid].astype(str), return_index=True)
    for code, i in zip(codes, first, strict=True):
        check_language(code, where=f"caption_langs[{np.flatnonzero(valid)[i]}]")
    order = sorted(codes, key=SUPPORTED.index)
    return {code: metrics_from_ranks(ranks[valid & (langs == code)]) for code in order}


# ----------------------------------------------------------------------------- nDCG / mAP
def _ranked_orders(s: np.ndarray, rows: np.ndarray, depth: np.ndarray | None = None):
    """Yield (row indices, each row's columns in ranked order) over blocks of rows.

    Order: decreasing similarity, equal scores by lower column index first. float32 rows are
    ranked by sorting one uint64 key per item (order-preserving bits of -sims in the high word,
    the column in the low word): a plain value sort, about twice as fast as a stable argsort;
    with ``depth`` (per row, how many leading positions are needed) only the first
    ``max(depth)`` positions of a block are returned, selected by a partition. Other dtypes use
    a stable argsort of -sims. Both paths give the same order.
    """
    cols = s.shape[1]
    step = max(1, _BLOCK // max(cols, 1))
    low = 0 if np.little_endian else 1
    for i in range(0, rows.size, step):
        idx = rows[i : i + step]
        block = s[idx]
        need = cols if depth is None else int(depth[idx].max(initial=0))
        if need == 0:
            yield idx, np.empty((idx.size, 0), dtype=np.intp)
            continue
        if block.dtype != np.float32 or cols >= 2**32:
            yield idx, np.argsort(np.negative(block), axis=1, kind="stable")[:, :need]
            continue
        bits = np.subtract(np.float32(0), block).view(np.uint32)  # 0 - x maps -0.0 and 0.0 to 0.0
        flip = (bits >> 31) * np.uint32(0x7FFFFFFF) | np.uint32(0x80000000)
        bits ^= flip  # IEEE bits -> unsigned integers in the same order
        key = np.empty(block.shape, dtype=np.uint64)
        words = key.view(np.uint32).reshape(*block.shape, 2)
        words[..., low] = np.arange(cols, dtype=np.uint32)
        words[..., 1 - low] = bits
        if 0 < need < cols // 2:
            key = np.partition(key, need - 1, axis=1)[:, :need]
        key.sort(axis=1)
        yield idx, key.view(np.uint32).reshape(*key.shape, 2)[:, :need, low]


def _gather(block: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``block[i, order[i, j]]`` for every (i, j), as one flat ``take`` (faster than
    ``take_along_axis`` on the uint32 column view)."""
    offsets = np.arange(0, block.size, block.shape[1], dtype=np.int64)[:, None]
    return block.ravel().take(order + offsets)


def _relevance_inputs(sims, relevance, query_masks):
    s = _as_array(sims, "sims")
    rel = _as_array(relevance, "relevance")
    if rel.shape != s.shape:
        raise ValueError(f"relevance has shape {rel.shape}; expected the shape of sims {s.shape}")
    if rel.min(initial=0) < 0 or rel.max(initial=0) > 1:
        r, c = np.argwhere((rel < 0) | (rel > 1))[0]
        raise ValueError(f"relevance[{r}, {c}] = {rel[r, c]} is outside [0, 1]")
    rows = np.flatnonzero(_row_mask(query_masks, s.shape[0]))
    _check_nan(s, "sims", rows)
    _check_nan(rel, "relevance", rows)
    return s, rel, rows


def _reduce(values: np.ndarray, rows: np.ndarray, total: int, reduction: str):
    if rows.size == 0:
        raise ValueError("no valid queries: every row is masked")
    if reduction == "mean":
        return float(values.mean())
    if reduction == "none":
        out = np.full(total, np.nan)
        out[rows] = values
        return out
    raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")


def ndcg(sims, relevance, query_masks=None, reduction: str = "mean"):
    """Normalised DCG in the EPIC-KITCHENS-100 multi-instance retrieval convention.

    Source: the official MIR evaluation (``calculate_nDCG`` of Wray et al.'s JPoSE code, used
    by EPIC-KITCHENS-100). For query row i with k_i = #{j: relevance[i, j] > 0}:
    DCG_i = sum_{p < k_i} rel_(p) / log2(p + 2) over the first k_i items ranked by sims,
    IDCG_i = the same sum with the items in decreasing relevance, nDCG_i = DCG_i / IDCG_i.
    Deviations stated: equal scores are ranked by lower column index first (the reference's
    argsort leaves this unspecified); a query with no relevant item counts 0 (the reference
    divides 0 by 0). ``query_masks``: one boolean per row ((rows,) or any shape of that size);
    masked rows are left out. ``reduction="mean"`` gives the mean over kept rows as a fraction
    in [0, 1]; ``"none"`` the per-row values (NaN for masked rows). Pass ``sims.T,
    relevance.T`` for the other direction.
    """
    s, rel, rows = _relevance_inputs(sims, relevance, query_masks)
    cols = s.shape[1]
    disc = 1.0 / np.log2(np.arange(cols) + 2.0)
    k_all = np.count_nonzero(rel > 0, axis=1)
    values = np.empty(rows.size)
    done = 0
    for idx, order in _ranked_orders(s, rows, depth=k_all):
        block_rel = rel[idx]
        k = k_all[idx]
        kmax = order.shape[1]
        head = _gather(block_rel, order)
        dcg = (head * (np.arange(kmax) < k[:, None])) @ disc[:kmax]
        ideal = np.sort(block_rel, axis=1)[:, ::-1][:, :kmax]  # items past k_i have relevance 0
        idcg = ideal @ disc[:kmax]
        values[done : done + idx.size] = np.divide(
            dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0
        )
        done += idx.size
    return _reduce(values, rows, s.shape[0], reduction)


def mean_average_precision(
    sims, relevance, query_masks=None, binary: bool = False, reduction: str = "mean"
):
    """Mean average precision in the EPIC-KITCHENS-100 multi-instance retrieval convention.

    Source: the official MIR evaluation (``calculate_mAP`` of Wray et al.'s JPoSE code). Items
    with relevance == 1 are relevant; AP_i = (1 / #relevant) * sum over relevant positions p
    (0-based) of C_i(p) / (p + 1), where C_i(p) is the cumulative *graded* relevance of the
    items ranked at or before p, as the official code computes it; ``binary=True`` counts only
    relevant items in C (textbook AP). Equal scores: lower column index first. A query with no
    relevant item counts 0 (the reference divides 0 by 0). ``query_masks``: one boolean per row;
    masked rows are left out. ``reduction``: "mean" (fraction in [0, 1]) or "none" (per row,
    NaN for masked rows).
    """
    s, rel, rows = _relevance_inputs(sims, relevance, query_masks)
    values = np.empty(rows.size)
    done = 0
    for idx, order in _ranked_orders(s, rows):
        ranked = _gather(rel[idx], order)
        hit = ranked == 1
        cum = np.cumsum(hit if binary else ranked, axis=1, dtype=np.float64)
        r, p = np.nonzero(hit)
        ap_sum = np.bincount(r, weights=cum[r, p] / (p + 1), minlength=idx.size)
        n_rel = np.count_nonzero(hit, axis=1)
        values[done : done + idx.size] = np.divide(
            ap_sum, n_rel, out=np.zeros(idx.size), where=n_rel > 0
        )
        done += idx.size
    return _reduce(values, rows, s.shape[0], reduction)


# ----------------------------------------------------------------------------- significance
class ConfidenceInterval(NamedTuple):
    estimate: float
    low: float
    high: float


def bootstrap_ci(
    values, statistic, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> ConfidenceInterval:
    """Percentile bootstrap interval over queries (Efron & Tibshirani 1993, ch. 13).

    ``values``: per-query ranks (from :func:`query_ranks`) or per-query scores (e.g.
    ``ndcg(..., reduction="none")``); NaN entries (masked queries) are dropped.
    ``statistic``: one of R1, R5, R10, R50, MdR, MnR, geometric_mean (on 0-based ranks, with
    :func:`metrics_from_ranks`' definitions), "mean", or a callable mapping an (B, n) array of
    resamples to (B,) values. Queries are resampled with replacement ``n_resamples`` times
    (all resamples drawn at once per block, numpy ``default_rng(seed)``); the interval is the
    (1 - confidence)/2 and (1 + confidence)/2 quantiles (linear interpolation) of the
    resampled statistic; ``estimate`` is the statistic on the full sample.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    if v.size == 0:
        raise ValueError("bootstrap_ci needs at least one non-NaN value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    stat = statistic if callable(statistic) else rank_statistic(statistic)
    rng = np.random.default_rng(seed)
    step = max(1, _BLOCK // v.size)
    boot = np.concatenate(
        [
            np.asarray(
                stat(v[rng.integers(0, v.size, size=(min(step, n_resamples - i), v.size))]),
                dtype=np.float64,
            ).reshape(-1)
            for i in range(0, n_resamples, step)
        ]
    )
    low, high = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return ConfidenceInterval(
        float(np.asarray(stat(v[None, :])).reshape(-1)[0]), float(low), float(high)
    )


class WilcoxonResult(NamedTuple):
    statistic: float
    pvalue: float
    n_queries: int
    n_nonzero: int


def wilcoxon_ranks(
    ranks_a, ranks_b, zero_method: str = "wilcox", alternative: str = "two-sided"
) -> WilcoxonResult:
    """Wilcoxon signed-rank test between two runs' per-query ranks (``scipy.stats.wilcoxon``).

    The runs must rank the same queries: NaN (masked) positions must coincide and are dropped.
    Zero differences (both runs rank the query equally, common at rank 0): by default
    ``zero_method="wilcox"`` discards them before ranking (Wilcoxon 1945); "pratt" ranks them
    and then drops them, "zsplit" splits their rank sums between the signs. When every
    difference is zero the test is undefined and the result is statistic 0, p-value 1. scipy
    chooses the exact null distribution for small samples without ties, the normal
    approximation otherwise. ``statistic`` is scipy's (for two-sided, the smaller signed-rank
    sum).
    """
    a = np.asarray(ranks_a, dtype=np.float64).reshape(-1)
    b = np.asarray(ranks_b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(
            f"ranks_a has {a.size} queries and ranks_b {b.size}; they must be the same queries"
        )
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        raise ValueError("ranks_a and ranks_b mask different queries (NaN positions differ)")
    keep = ~np.isnan(a)
    d = a[keep] - b[keep]
    nonzero = int(np.count_nonzero(d))
    if nonzero == 0:
        return WilcoxonResult(0.0, 1.0, int(d.size), 0)
    from scipy.stats import wilcoxon

    res = wilcoxon(d, zero_method=zero_method, alternative=alternative)
    return WilcoxonResult(float(res.statistic), float(res.pvalue), int(d.size), nonzero)
