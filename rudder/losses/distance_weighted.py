"""``dw``: distance-weighted negative sampling (Wu et al., ICCV 2017)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import (
    LossConfigError,
    RetrievalLoss,
    anchor_view,
    check_int,
    check_number,
    off_diagonal,
)

_DISTANCE_FLOOR = 1e-12  # keeps sqrt differentiable at sims == 1


def distances(sims: torch.Tensor) -> torch.Tensor:
    """Euclidean distance of unit vectors from their cosine: ``d = sqrt(2 - 2 s)``."""
    return torch.sqrt((2 - 2 * sims).clamp_min(_DISTANCE_FLOOR))


def negative_probabilities(dist: torch.Tensor, dim: int, cutoff: float,
                           nonzero_loss_cutoff: float) -> torch.Tensor:
    """Per-anchor sampling probabilities of the negatives, from (..., B, B) distances.

    The last two axes are anchors x candidates with the anchor's positive on the diagonal.
    ``q(d) ∝ d^(dim-2) (1 - d²/4)^((dim-3)/2)`` is the density of pairwise distances of
    points uniform on the unit sphere in ``dim`` dimensions (Wu et al., Sec. 4); the weight
    is ``q(d)^-1`` on ``d`` clipped below at ``cutoff``, computed in log space, and 0 on the
    diagonal, at ``d >= nonzero_loss_cutoff`` and where the log weight is not finite
    (``d >= 2``). Each row is normalised; a row whose weights are all zero falls back to
    uniform over its B-1 negatives. This is pytorch-metric-learning's
    ``DistanceWeightedMiner`` weighting, except that PML subtracts the global maximum log
    weight before ``exp`` (rows far below it underflow to zero and then divide 0 by 0),
    while this normalises each row in log space (a softmax): the same probabilities
    wherever PML's are defined.
    """
    clipped = dist.clamp_min(cutoff)
    log_weights = (2.0 - dim) * torch.log(clipped) - ((dim - 3) / 2.0) * torch.log(
        1.0 - 0.25 * clipped**2
    )
    negatives = off_diagonal(dist.shape[-1], dist.device)
    allowed = negatives & (clipped < nonzero_loss_cutoff) & torch.isfinite(log_weights)
    fallback = negatives & ~allowed.any(dim=-1, keepdim=True)  # rows with no weight left
    logits = torch.where(allowed, log_weights, torch.zeros_like(log_weights))
    logits = logits.masked_fill(~(allowed | fallback), float("-inf"))
    return torch.softmax(logits, dim=-1)


class DistanceWeighted(RetrievalLoss):
    """``dw``: triplet loss on negatives drawn by distance-weighted sampling.

    Formula: with ``d = sqrt(2 - 2 s)`` (the distance of unit embeddings from their
    cosine), for every anchor ``a`` (B caption anchors, B video anchors) one negative ``n``
    is drawn with :func:`negative_probabilities` (for embedding dimension ``dim``) from
    the anchor's row of the anchor view, using ``generator`` (:func:`sample_rows`); the
    term is
    ``[margin + d_aa - d_an]+``.
    Reduction: mean over the 2B anchors.
    Source: Wu, Manmatha, Smola, Krähenbühl, "Sampling Matters in Deep Embedding
    Learning", ICCV 2017, Sec. 4 (distance-weighted sampling), feeding the triplet loss
    of the RUDDER paper's DW baseline rather than Wu et al.'s margin-based loss; weighting as
    pytorch-metric-learning's ``DistanceWeightedMiner`` (see
    :func:`negative_probabilities` for the one numerical difference). The sampling is not
    differentiated. ``d`` is floored at sqrt(1e-12) so the gradient stays finite when a
    similarity reaches 1.
    """

    name = "dw"
    requires = ("generator",)
    param_names = ("margin", "dim", "cutoff", "nonzero_loss_cutoff")

    def __init__(self, margin: float = 0.2, dim: int | None = None, cutoff: float = 0.5,
                 nonzero_loss_cutoff: float = 1.4):
        super().__init__()
        if dim is None:
            raise LossConfigError(
                "loss 'dw' requires parameter 'dim': the embedding dimension the distance "
                "distribution is computed for (e.g. the model's shared embedding size)"
            )
        self.margin = check_number(self.name, "margin", margin, low=0)
        self.dim = check_int(self.name, "dim", dim, low=2)
        self.cutoff = check_number(self.name, "cutoff", cutoff, low=0, low_open=True)
        self.nonzero_loss_cutoff = check_number(
            self.name, "nonzero_loss_cutoff", nonzero_loss_cutoff, low=0, low_open=True
        )

    @classmethod
    def run_params(cls, params: dict, run) -> dict:
        """``dim``, unless given: the run's embedding dimension (the distribution is that of
        distances between points uniform on the model's unit sphere)."""
        return {"dim": run.embedding_dim} if params["dim"] is None else {}

    def probabilities(self, sims: torch.Tensor) -> torch.Tensor:
        """(2, B, B) sampling probabilities of every anchor's negatives (no gradient)."""
        with torch.no_grad():
            return negative_probabilities(
                distances(anchor_view(sims)), self.dim, self.cutoff, self.nonzero_loss_cutoff
            )

    def compute(self, sims, generator):
        drawn = sample_rows(self.probabilities(sims), generator)
        dist = distances(anchor_view(sims))
        d_neg = dist.gather(-1, drawn)
        d_pos = dist.diagonal(dim1=-2, dim2=-1).unsqueeze(-1)
        return F.relu(self.margin + d_pos - d_neg).mean()


def sample_rows(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One index per row of (..., B) ``probs`` by inverse-CDF sampling: (..., 1) long.

    Draws ``u ~ U[0, 1)`` per row and returns the first index whose cumulative
    probability exceeds ``u`` times the row total, so zero-probability entries are never
    drawn (a cheaper equivalent of ``torch.multinomial(probs, 1)``).
    """
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[:-1] + (1,), generator=generator, device=probs.device,
                   dtype=probs.dtype)
    drawn = torch.searchsorted(cdf, u * cdf[..., -1:], right=True)
    return drawn.clamp_max(probs.shape[-1] - 1)
