"""Embedding index of a video collection and exact top-k text-to-video search.

A query's score for video v is exactly :meth:`CollaborativeExperts.similarity`:
``sum_e w_e a_ve <t_e, v_e> / sum_e w_e a_ve`` with ``w = softmax(logits)`` and ``a`` the
availability (Collaborative Experts, reference ``sharded_cross_view_inner_product``).
Since ``sum_e w_e <t_e, v_e> = <concat_e(w_e t_e), concat_e(v_e)>`` the numerator is one
matrix product with the (E*D)-wide concatenated video embeddings (zero blocks where an
expert is missing) and the denominator is ``w @ a.T``.

:meth:`VideoIndex.search` answers one query exactly in two stages where that is faster on the
machine (:func:`half_scan_pays`, measured once per process): float16 per-expert
matrix-vector products (half the float32 memory traffic; the videos lacking an
expert are skipped) give approximate scores with a proven error bound
(:func:`half_error_bound`); every video whose approximate score could still reach the
top k is then scored in float32 with the formula above. Batches of queries, one query where
float16 products are not clearly faster, or ``prefilter=False``, scan all videos in float32
group by group, a group being the videos of
one availability pattern: there the denominator is one number per query, so ranking by the
numerator (one matrix product over the present experts only, with the group's rows packed
ahead of time for oneDNN: :func:`pack_rows`) is ranking by the score, as in
:class:`rudder.search.index_faiss.FaissSearch`, and only the k + 1 best numerators are divided.
Ties are ranked by the lower video index first (as in :mod:`rudder.evaluation.metrics`); the paths
agree up to float32 rounding. The on-disk cache of indexes is :mod:`rudder.search.index_cache`.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass

import torch

from rudder.atomic import replacing
from rudder.errors import RudderError
from rudder.runs.checkpoints import read_plain
from rudder.search.topk import chunk_topk, merge_topk, settle_kth_ties, sorted_by_score

INDEX_VERSION = 2  # 2: videos embedded in the fixed blocks of rudder.evaluation.inference


class SearchIndexError(RudderError):
    """An index file or query that does not fit the index."""


@dataclass
class SearchResult:
    """Top-k scores ``(Q, k)`` (descending) and video positions ``(Q, k)`` in the index."""

    scores: torch.Tensor
    indices: torch.Tensor


def mixture_query(
    text_emb: torch.Tensor, text_logits: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(concat_e(w_e t_e) (Q, E*D), w (Q, E))`` with ``w = softmax(logits)``; a query
    whose mixture is not finite (NaN or infinite embeddings, NaN logits) is refused."""
    if text_emb.dim() != 3 or text_logits.shape != text_emb.shape[:2]:
        raise SearchIndexError(
            f"expected text embeddings (Q, E, D) and logits (Q, E), got "
            f"{tuple(text_emb.shape)} and {tuple(text_logits.shape)}"
        )
    weights = torch.softmax(text_logits.float(), dim=-1)
    weighted = (text_emb.float() * weights.unsqueeze(-1)).flatten(1)
    bad = torch.nonzero(~torch.isfinite(weighted).all(1))
    if len(bad):
        raise SearchIndexError(
            f"query row {int(bad[0])}: its text embeddings or logits are not finite "
            "(NaN or inf); check the text encoder's output"
        )
    return weighted, weights


def check_k(k: int) -> None:
    """Refuse a number of results below 1."""
    if k < 1:
        raise SearchIndexError(f"k must be at least 1, got {k}")


PACK_BATCH = 128  # the query batch size oneDNN lays packed rows out for (any size works)


def _onednn_available() -> bool:
    ops = ("_reorder_linear_weight", "_linear_pointwise")  # private ops: checked, not assumed
    return torch.backends.mkldnn.is_available() and all(hasattr(torch.ops.mkldnn, o) for o in ops)


USE_ONEDNN = _onednn_available()


def pack_rows(matrix: torch.Tensor) -> torch.Tensor:
    """``matrix`` ``(n, C)`` ready for :func:`products`: reordered once into oneDNN's blocked
    layout (``torch.ops.mkldnn``, what ``torch.compile`` uses for linear layers on CPU) when
    torch has it, else a contiguous copy. On the AMD EPYC measured, oneDNN's float32 product
    with packed rows runs ~1.2x faster than faiss's OpenBLAS and ~1.5x faster than numpy's
    OpenBLAS or torch's MKL, and the packing is not repeated per call
    (benchmarks/bench_index.py)."""
    matrix = matrix.float().contiguous()
    if USE_ONEDNN:
        return torch.ops.mkldnn._reorder_linear_weight(matrix, PACK_BATCH)
    return matrix


def products(query: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """``query @ matrix.T`` ``(Q, n)`` in float32 for rows packed by :func:`pack_rows`."""
    if packed.is_mkldnn:
        return torch.ops.mkldnn._linear_pointwise(query.contiguous(), packed, None, "none", [], "")
    return query @ packed.T


HALF_GAIN = 0.7  # the float16 stage 1 must take at most this share of the float32 scan's time


@functools.cache
def half_scan_pays() -> bool:
    """Whether the two-stage search of one query beats the float32 scan on this machine.

    Measured once per process with torch's current threads: a float16 matrix-vector product
    (stage 1's kernel) against the float32 product with packed rows (:func:`products`, the
    scan's kernel) over the same 16,384 x 512 matrix (32 MB in float32, past most caches),
    best of 5 interleaved runs. Stage 1 must take at most :data:`HALF_GAIN` of the scan's
    time, leaving room for stage 2. On the 2-core AMD EPYC of docs/benchmarks.md it takes
    about half; CPUs without fast float16 conversion take longer than the scan.
    """
    g = torch.Generator().manual_seed(0)
    matrix = torch.randn(16_384, 512, generator=g)
    query = torch.randn(1, 512, generator=g)
    half, half_query, packed = matrix.half(), query[0].half(), pack_rows(matrix)
    runs = {"half": lambda: torch.mv(half, half_query), "float": lambda: products(query, packed)}
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(5):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best["half"] <= HALF_GAIN * best["float"]


_U_HALF, _U_F32 = 2.0**-11, 2.0**-24  # unit roundoffs of float16 and float32
HALF_SAFE = 256.0  # embeddings with larger entries get no float16 copies
HALF_MAX = 65504.0  # the largest finite float16


def fits_half(x: torch.Tensor) -> bool:
    """Every entry (finite) at most ``HALF_SAFE`` in magnitude."""
    return float(x.abs().max()) <= HALF_SAFE


def half_error_bound(text_norm: torch.Tensor, video_norm: float, dim: int) -> torch.Tensor:
    """Bound on ``|s' - s|`` for the stage-1 product of one expert, times a safety factor 2.

    ``s' = fl16(sum_d fl16(t_d) * fl16(v_d))`` with the products and their sum in float32
    (ATen's float16 matrix-vector kernel accumulates in float32; products of float16 numbers
    are exact in float32). Rounding to float16 moves ``x`` by at most ``u |x| + 2^-25`` (the
    absolute part covers subnormals), so by Cauchy-Schwarz the inputs contribute
    ``(2u + u^2) |t| |v| + 2^-24 sqrt(D) (|t| + |v|)``; the float32 sum of ``D`` terms
    ``gamma_D (1+u)^2 |t| |v|`` (Higham, *Accuracy and Stability of Numerical Algorithms*,
    Eq. 3.5) and the float16 output ``u |s'| + 2^-25``. With ``u = 2^-11``:
    ``(3u + 6u^2 + 1.1 D u32) |t| |v| + 2^-24 (sqrt(D) (|t| + |v|) + 1)``. It assumes no
    overflow, which :meth:`VideoIndex._half_safe` checks before stage 1.
    """
    relative = (3 * _U_HALF + 6 * _U_HALF**2 + 1.1 * dim * _U_F32) * text_norm * video_norm
    absolute = 2.0**-24 * (dim**0.5 * (text_norm + video_norm) + 1)
    return 2.0 * (relative + absolute)


class VideoIndex:
    """Per-expert video embeddings ``(N, E, D)`` with availability ``(N, E)``, searchable.

    At least one video, unique video ids, and finite embeddings wherever an expert is
    available (the rows of missing experts are ignored and stored as zeros).

    Besides the float32 embeddings, each expert keeps a float16 copy of the rows of the
    videos that have it, for the exact two-stage search of one query (see
    :func:`half_error_bound`): with ``prefilter=None`` (the default) where that search is
    faster on this machine (:func:`half_scan_pays`), with ``True`` always. ``False``, or
    embeddings too large for float16, keep only the float32 scan.
    """

    def __init__(
        self,
        video_ids,
        experts,
        embeddings: torch.Tensor,
        available: torch.Tensor,
        key: str = "",
        prefilter: bool | None = None,
    ):
        if (
            embeddings.dim() != 3
            or available.shape != embeddings.shape[:2]
            or available.dtype != torch.bool
        ):
            raise SearchIndexError(
                f"expected embeddings (N, E, D) and bool availability (N, E); got "
                f"{tuple(embeddings.shape)} and {available.dtype} {tuple(available.shape)}"
            )
        if len(video_ids) != embeddings.shape[0] or len(experts) != embeddings.shape[1]:
            raise SearchIndexError(
                f"{len(video_ids)} video ids and {len(experts)} experts for embeddings "
                f"{tuple(embeddings.shape)}"
            )
        if len(video_ids) == 0:
            raise SearchIndexError("an index needs at least one video; the collection is empty")
        if not available.any(1).all():
            raise SearchIndexError("every video in an index needs at least one available expert")
        self.video_ids = list(video_ids)
        self.experts = list(experts)
        self.available = available
        self.key = key
        masked = torch.where(available.unsqueeze(-1), embeddings.float(), 0.0)  # NaN-proof
        self._check_videos(masked)
        self.embeddings = masked
        self.flat = masked.flatten(1)  # (N, E*D), a view of the same memory
        self._available_f = available.float()
        if prefilter is None:
            prefilter = half_scan_pays()
        self._half = self._half_copies() if prefilter and fits_half(masked) else None
        self._half_norms = None if self._half is None else torch.tensor([c[2] for c in self._half])
        # per availability pattern, for batch searches (pattern_groups)
        self._groups: list | None = None
        # (chunk size, the groups' packed rows), for batch searches
        self._packed: tuple[int, list] | None = None

    def _check_videos(self, masked: torch.Tensor) -> None:
        """Refuse repeated video ids and NaN or infinite embeddings of available experts."""
        repeated = [v for v, count in Counter(self.video_ids).items() if count > 1]
        if repeated:
            raise SearchIndexError(
                f"video id {repeated[0]!r} is repeated ({len(repeated)} repeated ids in all); "
                "each video must be indexed once"
            )
        bad = torch.nonzero(~torch.isfinite(masked).all(2))
        if len(bad):
            video, expert = bad[0].tolist()
            raise SearchIndexError(
                f"video {self.video_ids[video]!r}: its {self.experts[expert]!r} embedding is not "
                "finite (NaN or inf); check its features or mark the expert unavailable"
            )

    def _half_copies(self):
        """Per expert: (rows of the videos that have it, None if all; float16 rows; max norm)."""
        copies = []
        for e in range(len(self.experts)):
            rows = torch.nonzero(self.available[:, e]).squeeze(1)
            matrix = self.embeddings[rows, e]
            norm = float(matrix.norm(dim=1).max()) if len(rows) else 0.0
            copies.append((None if len(rows) == len(self) else rows, matrix.half(), norm))
        return copies

    def _half_safe(self, text: torch.Tensor) -> bool:
        """Whether no float16 number of stage 1 can overflow for the query ``text`` (1, E, D):
        by Cauchy-Schwarz ``|<t_e, v_e>| <= |t_e| max_v |v_e|``, and an entry of ``t_e`` is at
        most ``|t_e|``; both must stay within half float16's range (room for the rounding)."""
        norms = text[0].float().norm(dim=1)
        return bool((torch.maximum(norms, norms * self._half_norms) <= HALF_MAX / 2).all())

    def __len__(self) -> int:
        return len(self.video_ids)

    @property
    def dim(self) -> int:
        return self.embeddings.shape[2]

    def _check_query(self, text_emb: torch.Tensor) -> None:
        if text_emb.shape[1:] != self.embeddings.shape[1:]:
            raise SearchIndexError(
                f"query embeddings {tuple(text_emb.shape)} do not fit the index "
                f"(N, E, D) = {tuple(self.embeddings.shape)}: was it built with another model?"
            )

    def scores(
        self,
        text_emb: torch.Tensor,
        text_logits: torch.Tensor,
        start: int = 0,
        stop: int | None = None,
    ):
        """Exact similarities ``(Q, stop - start)`` of the queries to videos ``[start, stop)``."""
        self._check_query(text_emb)
        weighted, weights = mixture_query(text_emb, text_logits)
        return self._scores(weighted, weights, start, len(self) if stop is None else stop)

    def _denominator(self, weights, start, stop):
        return (weights @ self._available_f[start:stop].T).clamp_min(
            torch.finfo(torch.float32).tiny
        )

    def _scores(self, weighted, weights, start, stop):
        return (weighted @ self.flat[start:stop].T) / self._denominator(weights, start, stop)

    @torch.no_grad()
    def search(
        self,
        text_emb: torch.Tensor,
        text_logits: torch.Tensor,
        k: int = 10,
        chunk_size: int = 50_000,
        prefilter: bool = True,
    ) -> SearchResult:
        """Exact top-``k`` videos of each query (ties: lower video index first).

        One query (the interactive case) goes through the two-stage search when the index
        has its float16 copies, ``prefilter`` is on and no float16 product can overflow
        (:meth:`_half_safe`); otherwise, and for a batch of queries, it goes through the
        float32 scan by availability pattern (chunks of at most ``chunk_size`` videos), where
        one matrix product serves every query of the batch.
        """
        self._check_query(text_emb)
        check_k(k)
        k = min(k, len(self))
        weighted, weights = mixture_query(text_emb, text_logits)
        two_stage = prefilter and self._half is not None and len(weighted) == 1
        if two_stage and self._half_safe(text_emb):
            found = self._search_two_stage(text_emb.float(), weighted, weights, k)
            if found is not None:
                return SearchResult(*found)
        return SearchResult(*self._search_groups(weighted, weights, k, chunk_size))

    def pattern_groups(self):
        """Per availability pattern: (member videos, present columns of ``flat``, the pattern
        as floats), built on the first batch search; :meth:`group_matrix` gives the rows."""
        groups = self._groups  # read and published once: concurrent searches see all or none
        if groups is None:
            patterns, group = torch.unique(self.available, dim=0, return_inverse=True)
            groups = []
            for g, pattern in enumerate(patterns):
                members = torch.nonzero(group == g).squeeze(1)
                experts = torch.nonzero(pattern).squeeze(1)
                columns = (experts.unsqueeze(1) * self.dim + torch.arange(self.dim)).reshape(-1)
                groups.append((members, columns, pattern.float()))
            self._groups = groups
        return groups

    def group_matrix(self, members: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """The embeddings of ``members`` over ``columns`` (a copy)."""
        return self.flat[members.unsqueeze(1), columns]

    def _packed_groups(self, chunk_size: int):
        """:meth:`pattern_groups` with each group's rows packed (:func:`pack_rows`) in chunks
        of at most ``chunk_size`` videos: (members, columns, pattern, [(start, packed)])."""
        cached = self._packed  # read and published once, as in pattern_groups
        if cached is None or cached[0] != chunk_size:
            packed = []
            for members, columns, pattern in self.pattern_groups():
                starts = range(0, len(members), chunk_size)
                rows = [self.group_matrix(members[s : s + chunk_size], columns) for s in starts]
                chunks = [(s, pack_rows(r)) for s, r in zip(starts, rows, strict=True)]
                packed.append((members, columns, pattern, chunks))
            cached = (chunk_size, packed)
            self._packed = cached
        return cached[1]

    def _search_groups(self, weighted, weights, k, chunk_size):
        """Exact top-k by availability pattern: inside a group the denominator is one number
        per query, so the top k + 1 numerators (products over the present experts only) are
        the top k + 1 scores and only those are divided; a tie across the k-th place is
        settled on the divided row (:func:`rudder.search.topk.settle_kth_ties`)."""
        tiny = torch.finfo(torch.float32).tiny
        best = None
        for members, columns, pattern, chunks in self._packed_groups(chunk_size):
            query = weighted[:, columns]
            denominator = (weights @ pattern).clamp_min(tiny).unsqueeze(1)
            for start, packed in chunks:
                numerator = products(query, packed)
                values, positions = numerator.topk(min(k + 1, numerator.shape[1]), dim=1)
                scores, positions = settle_kth_ties(
                    values / denominator,
                    positions,
                    k,
                    lambda rows, n=numerator, d=denominator: n[rows] / d[rows],
                )
                found = (scores, members[positions + start])
                best = found if best is None else merge_topk(best, found, k)
        assert best is not None  # the index holds at least one video
        return sorted_by_score(*best)

    def approximate(
        self, text: torch.Tensor, weights: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Stage-1 scores ``(1, N)`` of one query (text ``(1, E, D)``, mixture weights
        ``(1, E)``) from float16 matrix-vector products, and a bound ``b`` ``(1,)`` with
        ``|approx - exact| <= b``: each score is a weighted mean of per-expert products, so it
        is off by at most the largest per-expert bound (float32 weighting and division add
        a few float32 roundoffs, far inside the bound's safety factor)."""
        if self._half is None:
            raise SearchIndexError("this index has no float16 copies (built with prefilter=False, "
                                   "or float16 products are not faster on this machine)")
        if len(text) != 1:
            raise SearchIndexError("stage 1 takes one query; batches use the float32 scan")
        if not self._half_safe(text):
            raise SearchIndexError(
                f"query too large for float16: |t_e| * max |v_e| must stay below {HALF_MAX / 2}"
            )
        approx = torch.zeros(len(self))
        bound = torch.zeros(())
        for e, (rows, matrix, norm) in enumerate(self._half):
            part = torch.mv(matrix, text[0, e].half()).float() * weights[0, e]
            if rows is None:
                approx += part
            else:
                approx.index_add_(0, rows, part)
            bound = torch.maximum(bound, half_error_bound(text[0, e].norm(), norm, self.dim))
        return (approx / self._denominator(weights, 0, len(self))[0]).unsqueeze(0), bound.reshape(1)

    def _search_two_stage(self, text, weighted, weights, k):
        """The k best stage-1 scores are >= tau, so their exact scores are >= tau - b; a video
        with approx < tau - 2b has exact < tau - b and cannot be in the top k. Every other
        video is scored exactly in float32 (4096 at a time) and the top k of those returned.
        None if a stage-1 score is not finite (then nothing can be pruned safely)."""
        approx, bound = self.approximate(text, weights)
        # One NaN or inf entry makes the sum non-finite (20x faster than checking each entry).
        if not torch.isfinite(approx.sum()):
            return None
        tau = approx.topk(k, dim=1).values[:, -1:]
        query, video = torch.nonzero(approx >= tau - 2 * bound.unsqueeze(1), as_tuple=True)
        exact = torch.full_like(approx, -torch.inf)
        tiny = torch.finfo(torch.float32).tiny
        for start in range(0, len(query), 4096):
            q, v = query[start : start + 4096], video[start : start + 4096]
            numerator = (self.flat[v] * weighted[q]).sum(1)
            exact[q, v] = numerator / (weights[q] * self._available_f[v]).sum(1).clamp_min(tiny)
        return chunk_topk(exact, k)

    # ------------------------------------------------------------------ disk
    def save(self, path) -> None:
        """Write the index atomically (temporary file + rename)."""
        state = {
            "version": INDEX_VERSION,
            "key": self.key,
            "video_ids": self.video_ids,
            "experts": self.experts,
            "embeddings": self.embeddings,
            "available": self.available,
        }
        with replacing(path) as tmp:
            torch.save(state, tmp)

    @classmethod
    def load(cls, path) -> VideoIndex:
        state = read_plain(path, error=SearchIndexError)
        version = state.get("version") if isinstance(state, dict) else None
        if version != INDEX_VERSION:
            raise SearchIndexError(
                f"{path}: index version {version} is not {INDEX_VERSION}; "
                "delete the file to rebuild it"
            )
        return cls(
            state["video_ids"],
            state["experts"],
            state["embeddings"],
            state["available"],
            state["key"],
        )
