"""Exact top-k search through faiss (optional extra ``pip install .[faiss]``).

Videos are grouped by availability pattern; inside a group the score's denominator is one
positive number per query, so ranking by the inner product (``faiss.IndexFlatIP`` over the
group's present experts only) is ranking by the score; the groups' top-k are merged.
"""

from __future__ import annotations

import torch

from rudder.index import SearchResult, VideoIndex, mixture_query
from rudder.topk import merge_topk, sorted_by_score


class FaissSearch:
    """Exact top-k through ``faiss.IndexFlatIP``, one flat index per availability pattern.

    Scores equal :meth:`VideoIndex.search`'s up to float rounding (faiss sums in another
    order), so rankings agree except between videos whose scores differ by ~1e-6.
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
        weighted, weights = mixture_query(text_emb, text_logits)
        best = None
        for members, columns, pattern, flat in self.groups:
            query = weighted[:, columns].contiguous().numpy()
            inner, positions = flat.search(query, min(k, len(members)))
            inner, positions = torch.from_numpy(inner), torch.from_numpy(positions)
            denominator = (weights @ pattern).clamp_min(torch.finfo(torch.float32).tiny)
            found = (inner / denominator.unsqueeze(1), members[positions])
            best = found if best is None else merge_topk(best, found, k)
        return SearchResult(*sorted_by_score(*best))
