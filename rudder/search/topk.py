"""Exact top-k of rows of scores, ties broken by the lower index first.

The tie convention is :mod:`rudder.evaluation.metrics`'s (a stable sort by decreasing score);
``torch.topk`` alone leaves the choice among values tied with the k-th arbitrary.
"""

from __future__ import annotations

import torch


def sorted_by_score(
    scores: torch.Tensor, indices: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ordered by score descending, then index ascending (stable sorts)."""
    by_index = indices.argsort(dim=1, stable=True)
    scores, indices = scores.gather(1, by_index), indices.gather(1, by_index)
    order = scores.argsort(dim=1, descending=True, stable=True)
    return scores.gather(1, order), indices.gather(1, order)


def chunk_topk(scores: torch.Tensor, k: int, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of each row of ``scores`` with ties broken by lower column first.

    ``torch.topk`` picks arbitrarily among values tied with the k-th; the (k+1)-th value
    shows whether a tie crosses the k-th place, and only such rows are redone, by
    :func:`fill_ties` (no sort). Returned indices are columns plus ``offset``.
    """
    k = min(k, scores.shape[1])
    values, columns = scores.topk(min(k + 1, scores.shape[1]), dim=1)
    if values.shape[1] > k:
        crossing = (
            values[:, k] == values[:, k - 1] if k else torch.zeros(len(values), dtype=torch.bool)
        )
        values, columns = values[:, :k].clone(), columns[:, :k].clone()
        if crossing.any():
            columns[crossing] = fill_ties(scores[crossing], values[crossing, k - 1 :], k)
            values[crossing] = scores[crossing].gather(1, columns[crossing])
    values, columns = sorted_by_score(values, columns)
    return values, columns + offset


def settle_kth_ties(
    scores: torch.Tensor, columns: torch.Tensor, k: int, full_rows
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k from the ``k + 1`` best ``scores`` (and their ``columns``) of each row,
    as a top-k routine (``torch.topk``, faiss) found them, choosing arbitrarily among ties.
    Where the (k+1)-th score equals the k-th (a tie across the k-th place) the row is redone
    by :func:`chunk_topk` on ``full_rows(crossing)``, the full score rows of those rows."""
    if scores.shape[1] <= k:
        return scores, columns
    crossing = scores[:, k] == scores[:, k - 1]
    scores, columns = scores[:, :k].clone(), columns[:, :k].clone()
    if crossing.any():
        scores[crossing], columns[crossing] = chunk_topk(full_rows(crossing), k)
    return scores, columns


def fill_ties(scores: torch.Tensor, kth: torch.Tensor, k: int) -> torch.Tensor:
    """Columns ``(r, k)`` of the k best of each row of ``scores`` whose k-th best value is
    ``kth`` ``(r, 1)``: every column above ``kth`` (NaN included, as ``topk`` ranks it first),
    then the lowest columns equal to ``kth`` (a running count of the ties picks them)."""
    above = ~(scores <= kth)
    tied = scores == kth
    wanted = k - above.sum(1, keepdim=True)
    keep = above | (tied & (tied.cumsum(1) <= wanted))
    return keep.nonzero()[:, 1].reshape(len(scores), k)


def merge_topk(first: tuple, second: tuple, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of two candidate lists (score, index), ties by lower index first."""
    scores = torch.cat([first[0], second[0]], dim=1)
    indices = torch.cat([first[1], second[1]], dim=1)
    scores, indices = sorted_by_score(scores, indices)
    return scores[:, :k], indices[:, :k]
