"""Retrieval metrics: R@K, MdR, MnR, nDCG, mAP (significance tests:
:mod:`rudder.evaluation.significance`).

Conventions (docs/architecture.md): ``sims[i, j]`` is the similarity of caption ``i`` and
video ``j``;
with K captions per video the rows are video-major (row ``r`` is caption ``r % K`` of video
``r // K``) and ``query_masks`` has shape ``(num_videos, K)``. Inputs may be numpy arrays or
torch tensors (converted to numpy; float16/bfloat16 widened losslessly to float32, integers
and booleans to float64). NaN similarities are rejected.

Every computation is vectorised over queries; matrices are processed in blocks of rows of
about ``_BLOCK`` elements (small enough for a block's temporaries to stay in cache), never one
query at a time.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np

from rudder.metric_names import GEOMETRIC_MEAN, RANK_STATISTICS, RECALL_KS

_BLOCK = 1 << 20  # elements per processing block (4 MB of float32: its temporaries stay in cache)


# ----------------------------------------------------------------------------- inputs
def _as_array(x, name: str) -> np.ndarray:
    """``x`` (numpy or torch) as a 2-D numpy float array (NaN is checked by ``_reject_nan``)."""
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


def _reject_nan(block: np.ndarray, row_ids: np.ndarray, name: str) -> None:
    """Raise on a NaN in ``block`` (rows ``row_ids`` of ``name``; masked rows may hold anything).

    One summing pass: a row's sum is finite unless the row holds a NaN or an infinity (or
    overflows), and only such rows are searched (a whole-matrix ``isnan`` costs a third of a
    rank computation).
    """
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, overflow: searched below
        suspect = np.flatnonzero(~np.isfinite(np.add.reduce(block, axis=1)))
    if suspect.size:
        bad = np.isnan(block[suspect])
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise ValueError(
                f"{name} has NaN at row {row_ids[suspect[r]]}, column {c}; fix the model output or "
                "mask that query"
            )


def _row_blocks(arr: np.ndarray, rows: np.ndarray):
    """Yield (row ids, ``arr[row ids]``) over ``rows`` (ascending) in blocks of about ``_BLOCK``
    elements; a block of consecutive rows is a view, not a copy."""
    step = max(1, _BLOCK // max(arr.shape[1], 1))
    for i in range(0, rows.size, step):
        idx = rows[i : i + step]
        consecutive = idx[-1] - idx[0] == idx.size - 1
        yield idx, (arr[idx[0] : idx[-1] + 1] if consecutive else arr[idx])


def _check_nan(arr: np.ndarray, name: str, rows: np.ndarray | None = None) -> None:
    """Reject NaN in the given rows of ``arr`` (default all), block by block."""
    rows = np.arange(arr.shape[0]) if rows is None else rows
    for idx, block in _row_blocks(arr, rows):
        _reject_nan(block, idx, name)


def _mask_array(query_masks) -> np.ndarray:
    """``query_masks`` (numpy, torch or nested lists of 0/1 or booleans) as a bool array."""
    if type(query_masks).__module__.split(".")[0] == "torch":
        query_masks = query_masks.detach().cpu().numpy()
    qm = np.asarray(query_masks)
    if not np.isin(qm, (0, 1)).all():
        raise ValueError("query_masks must hold only 0/1 (or booleans)")
    return qm.astype(bool)


def _caption_validity(query_masks, rows: int, cols: int) -> tuple[np.ndarray, int]:
    """(valid row flags (rows,), K) from ``query_masks`` of shape (num_videos, K)
    (docs/architecture.md)."""
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
def _count(flags: np.ndarray, axis: int) -> np.ndarray:
    """Number of True along ``axis`` (bytes summed into int32: faster than ``count_nonzero``)."""
    return np.add.reduce(flags.view(np.int8), axis=axis, dtype=np.int32)


def query_ranks(sims, query_masks=None, direction: str = "t2v") -> np.ndarray:
    """0-based, tie-averaged rank of the ground truth of every query.

    Source: Collaborative Experts' evaluation code (``model/metric.py``: ``t2v_metrics``,
    ``v2t_metrics`` with ``break_ties = "averaging"``, after McSherry & Najork, ECIR 2008): a
    tie counts as the mean of the tied positions, ``#(greater) + (#(equal) - 1) / 2``, so a
    constant matrix with N videos ranks every query at (N - 1) / 2.

    t2v: every valid caption row is a query over all videos; returns shape (rows,).
    v2t: each valid caption is ranked within its own video's column among all valid captions;
    a video's rank is the minimum over its valid captions (CE / VSE), i.e. the rank of its
    best-scoring valid caption (a higher score has a strictly lower tie-averaged rank);
    returns (num_videos,). Masked captions and videos without a valid caption get NaN
    (aligned for saving and comparing runs); masked caption rows are also left out of the v2t
    gallery (CE pushes them past every valid caption, which ranks the same).
    """
    if direction not in ("t2v", "v2t"):
        raise ValueError(f"direction must be 't2v' or 'v2t', got {direction!r}")
    s = _as_array(sims, "sims")
    rows, cols = s.shape
    valid, k = _caption_validity(query_masks, rows, cols)
    vr = np.flatnonzero(valid)
    if direction == "t2v":
        out = np.full(rows, np.nan)
        for idx, block in _row_blocks(s, vr):
            _reject_nan(block, idx, "sims")
            pos = block[np.arange(idx.size), idx // k][:, None]
            out[idx] = _count(block > pos, 1) + (_count(block == pos, 1) - 1) / 2
        return out
    # One pass over the valid rows compares every column with its video's best valid caption.
    out = np.full(cols, np.nan)
    if vr.size == 0:
        return out
    owner = vr // k
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    videos = owner[starts]
    best = np.full(cols, np.nan, dtype=s.dtype)  # NaN compares False: videos without a query
    best[videos] = np.maximum.reduceat(s[vr, owner], starts)
    greater = np.zeros(cols, dtype=np.int64)
    equal = np.zeros(cols, dtype=np.int64)
    for idx, block in _row_blocks(s, vr):
        _reject_nan(block, idx, "sims")
        greater += _count(block > best, 0)
        equal += _count(block == best, 0)
    out[videos] = greater[videos] + (equal[videos] - 1) / 2
    return out


def target_ranks(sims, targets) -> np.ndarray:
    """0-based, tie-averaged rank of column ``targets[i]`` in row ``i`` of ``sims``, as
    :func:`query_ranks` ranks a caption's own video (``#(greater) + (#(equal) - 1) / 2``),
    for queries whose ground truth is any column (a caption's translation among captions,
    a query's video in a subset). NaN similarities are rejected."""
    s = _as_array(sims, "sims")
    _reject_nan(s, np.arange(len(s)), "sims")
    own = s[np.arange(len(s)), np.asarray(targets)][:, None]
    return _count(s > own, 1) + (_count(s == own, 1) - 1) / 2


# ----------------------------------------------------------------------------- statistics
def recall_at(ranks: np.ndarray, k: int) -> np.ndarray:
    """Percent of queries retrieved within the first ``k`` over the last axis of 0-based,
    tie-averaged ranks, as Collaborative Experts' ``cols2metrics``: R@1 counts rank == 0
    (an untied first place: a first place shared by two items ranks 0.5 and is no hit),
    R@K for K > 1 counts rank < K."""
    hits = ranks == 0 if k == 1 else ranks < k
    return 100.0 * np.count_nonzero(hits, axis=-1) / hits.shape[-1]


def rank_statistic(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Vectorised statistic over the last axis of a (..., n) array of 0-based ranks."""
    if name in {f"R{k}" for k in RECALL_KS}:
        return lambda r: recall_at(r, int(name[1:]))
    if name == "MdR":
        return lambda r: np.median(r, axis=-1) + 1
    if name == "MnR":
        return lambda r: np.mean(r, axis=-1) + 1
    if name == GEOMETRIC_MEAN:

        def gmean(r):
            rk = np.stack([recall_at(r, k) for k in (1, 5, 10)])
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
    """Collaborative Experts' ``cols2metrics`` (in percent): R1 = %(rank == 0), R5, R10, R50 =
    %(rank < K) (:func:`recall_at`), MdR, MnR = median, mean of rank + 1, and geometric_mean =
    gmean(R1, R5, R10) (0 if any is 0; CE's ``geometric_mean_R1-R5-R10``). NaN ranks (masked
    queries) are left out."""
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    r = r[~np.isnan(r)]
    if r.size == 0:
        raise ValueError("no valid queries: every query is masked")
    return {name: float(rank_statistic(name)(r)) for name in RANK_STATISTICS}


def retrieval_metrics(sims, query_masks=None, direction: str = "t2v") -> dict[str, float]:
    """docs/architecture.md's R@K / MdR / MnR / geometric mean for one direction.

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
def _order_bits(block: np.ndarray) -> np.ndarray:
    """float32 -> uint32 whose ascending order is the descending order of the values, with
    -0.0 and 0.0 equal: the IEEE bits of x >= 0 flipped below the sign bit, those of x < 0
    kept (larger magnitude, later)."""
    bits = np.add(block, np.float32(0)).view(np.int32)  # -0.0 + 0.0 = 0.0
    flip = bits >> 31
    np.invert(flip, out=flip)
    flip &= 0x7FFFFFFF
    flip ^= bits
    return flip.view(np.uint32)


def _ranked_relevance(block: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """Each row's relevance in ranked order: by decreasing score, equal scores by lower column
    first (the order of a stable sort of the negated scores).

    float32 scores go through the faster of two equivalent rankings on this machine
    (:func:`_float32_ranking`); other dtypes through numpy's stable argsort of the negated
    scores.
    """
    if block.dtype != np.float32:
        order = np.argsort(np.negative(block), axis=1, kind="stable")
        return np.take_along_axis(rel, order, axis=1)
    return _float32_ranking()(block, rel)


def _row_offsets(rows: int, cols: int) -> np.ndarray:
    """``(rows, 1)`` start of each row in the flattened ``(rows, cols)`` block."""
    return np.arange(0, rows * cols, cols)[:, None]


def _ranking_by_radix(block: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """:func:`_ranked_relevance` of float32 scores by a least-significant-digit radix sort of
    their order bits (:func:`_order_bits`): a stable argsort by the low 16 bits, then by the
    high 16 bits (numpy's stable argsort of 16-bit integers is a radix sort, linear in the row
    length), carrying the relevance along. Stability keeps equal scores in column order."""
    rows, cols = block.shape
    bits = _order_bits(block)
    offsets = _row_offsets(rows, cols)
    by_low = np.argsort((bits & 0xFFFF).astype(np.uint16), axis=1, kind="stable")
    by_low += offsets
    high = (bits >> 16).astype(np.uint16).reshape(-1).take(by_low)
    by_high = np.argsort(high, axis=1, kind="stable")
    by_high += offsets
    by_low_rel = np.ascontiguousarray(rel).reshape(-1).take(by_low)  # ranked by the low bits
    return by_low_rel.reshape(-1).take(by_high)


def _ranking_by_keys(block: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """:func:`_ranked_relevance` of float32 scores by one sort of 64-bit keys: the score's
    order bits (:func:`_order_bits`) above the column index, so keys are distinct and their
    ascending order is by decreasing score, equal scores by lower column (no stable sort
    needed); the column is read back from the sorted keys' low half."""
    rows, cols = block.shape
    keys = np.empty((rows, cols), dtype=np.uint64)
    halves = keys.view(np.uint32).reshape(rows, cols, 2)
    low, high = (0, 1) if np.little_endian else (1, 0)
    halves[..., high] = _order_bits(block)
    halves[..., low] = np.arange(cols, dtype=np.uint32)
    keys.sort(axis=1)
    columns = halves[..., low].astype(np.intp)
    columns += _row_offsets(rows, cols)
    return np.ascontiguousarray(rel).reshape(-1).take(columns)


@functools.cache
def _float32_ranking() -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The faster of :func:`_ranking_by_radix` and :func:`_ranking_by_keys` here, chosen once
    per process by timing both on a random 64 x 4,096 block (best of 3 interleaved runs).

    Their outputs are identical; their speeds are not portable: where numpy sorts 64-bit
    integers with SIMD (x86-simd-sort on AVX-512 CPUs) the single key sort takes about half
    the time of the radix passes, while on the 2-core AMD EPYC measured in
    docs/benchmarks.md it takes about twice as long (benchmarks/bench_metrics.py prints the
    choice).
    """
    rng = np.random.default_rng(0)
    block = rng.standard_normal((64, 4096), dtype=np.float32)
    rel = rng.random(block.shape, dtype=np.float32)
    rankings = (_ranking_by_radix, _ranking_by_keys)
    best = dict.fromkeys(rankings, float("inf"))
    for _ in range(3):
        for ranking in rankings:
            start = time.perf_counter()
            ranking(block, rel)
            best[ranking] = min(best[ranking], time.perf_counter() - start)
    return min(rankings, key=best.__getitem__)


def _dcg_ratio(ranked: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """nDCG of each row (see :func:`ndcg`) from its relevance in ranked order."""
    k = _count(rel > 0, 1)
    kmax = int(k.max(initial=0))
    disc = 1.0 / np.log2(np.arange(kmax) + 2.0)
    dcg = (ranked[:, :kmax] * (np.arange(kmax) < k[:, None])) @ disc
    idcg = np.sort(rel, axis=1)[:, rel.shape[1] - kmax :] @ disc[::-1]  # past k_i: zeros
    return np.divide(dcg, idcg, out=np.full_like(dcg, np.nan), where=idcg > 0)  # n/a: no item


def _average_precision(ranked: np.ndarray, binary: bool) -> np.ndarray:
    """AP of each row (see :func:`mean_average_precision`) from its relevance in ranked order.

    Only the relevant positions are visited: the graded relevance between a relevant
    position and the previous one of its row (or the row start) is summed in one
    ``reduceat`` pass, and a running sum of those segments restarted at each row gives the
    cumulative relevance at every relevant position (no full-row ``cumsum``, the slow part
    of a per-row loop or of the reference code).
    """
    n, cols = ranked.shape
    hits = np.flatnonzero((ranked == 1).reshape(-1))  # by row, then by position
    row, pos = np.divmod(hits, cols)
    n_rel = np.bincount(row, minlength=n)
    first = np.r_[True, row[1:] != row[:-1]] if hits.size else np.zeros(0, dtype=bool)
    if binary:  # the j-th relevant item of a row has j relevant items at or before it
        found = np.arange(1, hits.size + 1) - (np.cumsum(n_rel) - n_rel)[row]
    elif hits.size:
        # segment of hit h: [previous hit of its row + 1 or the row start, h); reduceat over
        # the interleaved (segment start, h) cuts sums every segment (and, between them,
        # the stretches from a hit to the next segment start, which are dropped)
        starts = np.where(first, row * cols, np.r_[0, hits[:-1] + 1])
        cuts = np.empty(2 * hits.size, dtype=np.intp)
        cuts[0::2], cuts[1::2] = starts, hits
        values = np.ascontiguousarray(ranked).reshape(-1)
        segment = np.add.reduceat(values, cuts, dtype=np.float64)[0::2]
        segment[starts == hits] = 0.0  # an empty segment (reduceat gives values[start])
        segment += 1.0  # the hit itself (relevance exactly 1)
        running = np.cumsum(segment)
        found = running - np.maximum.accumulate(np.where(first, running - segment, 0.0))
    else:
        found = np.zeros(0)
    ap_sum = np.bincount(row, weights=found / (pos + 1), minlength=n).astype(np.float64)
    return np.divide(ap_sum, n_rel, out=np.full_like(ap_sum, np.nan), where=n_rel > 0)


def _relevance_scores(sims, relevance, query_masks, binary: bool, want: tuple[str, ...]):
    """Per kept row, the nDCG and/or AP (``want``) of each query row, from one ranking."""
    s = _as_array(sims, "sims")
    rel = _as_array(relevance, "relevance")
    if rel.shape != s.shape:
        raise ValueError(f"relevance has shape {rel.shape}; expected the shape of sims {s.shape}")
    if rel.min(initial=0) < 0 or rel.max(initial=0) > 1:
        r, c = np.argwhere((rel < 0) | (rel > 1))[0]
        raise ValueError(f"relevance[{r}, {c}] = {rel[r, c]} is outside [0, 1]")
    rows = np.flatnonzero(_row_mask(query_masks, s.shape[0]))
    if rows.size == 0:
        raise ValueError("no valid queries: every row is masked")
    values = {name: np.empty(rows.size) for name in want}
    done = 0
    for (idx, block), (_, block_rel) in zip(
        _row_blocks(s, rows), _row_blocks(rel, rows), strict=True
    ):
        _reject_nan(block, idx, "sims")
        _reject_nan(block_rel, idx, "relevance")
        ranked = _ranked_relevance(block, block_rel)
        at = slice(done, done + idx.size)
        if "nDCG" in values:
            values["nDCG"][at] = _dcg_ratio(ranked, block_rel)
        if "mAP" in values:
            values["mAP"][at] = _average_precision(ranked, binary)
        done += idx.size
    return rows, s.shape[0], values


def _reduce(values: np.ndarray, rows: np.ndarray, total: int, reduction: str):
    """"mean": over the queries where the metric is defined (NaN if none); "none": per row."""
    if reduction == "mean":
        defined = values[~np.isnan(values)]
        return float(defined.mean()) if defined.size else float("nan")
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
    Deviations stated: equal scores are ranked by lower column index first (the reference
    reverses an ascending ``argsort``, which in practice puts the higher column first); a
    query with no relevant item (k_i = 0) is n/a, NaN: the reference divides 0 by 0, which
    makes its mean NaN; here the mean is over the queries where nDCG is defined
    (:func:`defined_queries` counts them) and NaN when there is none. ``query_masks``:
    one boolean per row ((rows,) or any shape of that size); masked rows are left out.
    ``reduction="mean"`` gives that mean as a fraction in [0, 1]; ``"none"`` the per-row
    values (NaN for masked rows and for rows without a relevant item). Pass ``sims.T,
    relevance.T`` for the other direction.
    """
    rows, total, values = _relevance_scores(sims, relevance, query_masks, False, ("nDCG",))
    return _reduce(values["nDCG"], rows, total, reduction)


def mean_average_precision(
    sims, relevance, query_masks=None, binary: bool = False, reduction: str = "mean"
):
    """Mean average precision in the EPIC-KITCHENS-100 multi-instance retrieval convention.

    Source: the official MIR evaluation (``calculate_mAP`` of Wray et al.'s JPoSE code). Items
    with relevance == 1 are relevant; AP_i = (1 / #relevant) * sum over relevant positions p
    (0-based) of C_i(p) / (p + 1), where C_i(p) is the cumulative *graded* relevance of the
    items ranked at or before p, as the official code computes it; ``binary=True`` counts only
    relevant items in C (textbook AP). Equal scores: lower column index first. A query with no
    relevant item is n/a, NaN (the reference divides 0 by 0, making its mean NaN); "mean" is
    over the queries where AP is defined (:func:`defined_queries`), NaN when there is none:
    never 0 for "no relevant item anywhere". ``query_masks``: one boolean per row; masked rows
    are left out. ``reduction``: "mean" (fraction in [0, 1]) or "none" (per row, NaN for
    masked rows and for rows without a relevant item).
    """
    rows, total, values = _relevance_scores(sims, relevance, query_masks, binary, ("mAP",))
    return _reduce(values["mAP"], rows, total, reduction)


def relevance_metrics(sims, relevance, query_masks=None, reduction: str = "mean") -> dict:
    """``{"nDCG": ndcg(...), "mAP": mean_average_precision(...)}`` from one ranking of each
    row (half the work of the two calls; same definitions and arguments)."""
    rows, total, values = _relevance_scores(sims, relevance, query_masks, False, ("nDCG", "mAP"))
    return {name: _reduce(v, rows, total, reduction) for name, v in values.items()}


def defined_queries(per_query) -> int:
    """Number of queries where a per-query metric (``reduction="none"``) is defined (not NaN):
    the ``<metric>_queries`` that :func:`rudder.evaluation.inference.split_metrics` reports beside
    a mean."""
    return int(np.count_nonzero(~np.isnan(np.asarray(per_query, dtype=np.float64))))
