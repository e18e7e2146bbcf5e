"""Exact top-k search through faiss (optional extra ``pip install .[faiss]``).

Videos are grouped by availability pattern; inside a group the score's denominator is one
positive number per query, so ranking by the inner product (``faiss.IndexFlatIP`` over the
group's present experts only) is ranking by the score; the groups' top-k are merged.
faiss picks arbitrarily among videos tied with the k-th, so it is asked for k + 1 and a row
with a tie across the k-th place is redone exactly, as :class:`rudder.search.index.VideoIndex` does.
"""

from __future__ import annotations

from functools import partial

import torch

from rudder.search.index import SearchResult, VideoIndex, check_k, mixture_query
from rudder.search.topk import merge_topk, settle_kth_ties, sorted_by_score


class FaissSearch:
    """Exact top-k through ``faiss.IndexFlatIP``, one flat index per availability pattern.

    Scores equal :meth:`VideoIndex.search`'s up to float rounding (faiss sums in another
    order), so rankings agree except between videos whose scores differ by ~1e-6; equal
    scores rank the lower video index first, as there.
    ``blas_threshold`` sets ``faiss.cvar.distance_compute_blas_threshold`` (query batches
    at least this large use BLAS; faiss's default is 20).
    """

    def __init__(self, index: VideoIndex, blas_threshold: int | None = None):
        try:
            import faiss
        except ImportError as error:
            raise ImportError(
                "FaissSearch needs faiss: pip install '.[faiss]' (faiss-cpu)"
            ) from error
        if blas_threshold is not None:
            faiss.cvar.distance_compute_blas_threshold = blas_threshold
        self.index = index
        self.groups = []
        for members, columns, pattern in index.pattern_groups():
            flat = faiss.IndexFlatIP(len(columns))
            flat.add(index.group_matrix(members, columns).numpy())
            self.groups.append((members, columns, pattern, flat))

    @torch.no_grad()
    def search(
        self, text_emb: torch.Tensor, text_logits: torch.Tensor, k: int = 10
    ) -> SearchResult:
        self.index._check_query(text_emb)
        check_k(k)
        weighted, weights = mixture_query(text_emb, text_logits)
        tiny = torch.finfo(torch.float32).tiny
        best: tuple[torch.Tensor, torch.Tensor] | None = None
        for members, columns, pattern, flat in self.groups:
            query = weighted[:, columns].contiguous()
            inner, nearest = flat.search(query.numpy(), min(k + 1, len(members)))
            denominator = (weights @ pattern).clamp_min(tiny).unsqueeze(1)
            scores, positions = settle_kth_ties(
                torch.from_numpy(inner) / denominator,
                torch.from_numpy(nearest),
                k,
                partial(self._group_scores, query, denominator, members, columns),
            )
            found = (scores, members[positions])
            best = found if best is None else merge_topk(best, found, k)
        assert best is not None  # an index has at least one availability group
        return SearchResult(*sorted_by_score(*best))

    def _group_scores(self, query, denominator, members, columns, rows):
        """Float32 scores of the queries picked by the mask ``rows`` against every video of
        one group (``members`` over ``columns``)."""
        return query[rows] @ self.index.group_matrix(members, columns).T / denominator[rows]
