"""``po``: the RUDDER partial-order quadruplet loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rudder.devices import upload
from rudder.labels import PairLabel

from ._base import (
    LossConfigError,
    RetrievalLoss,
    anchor_view,
    check_bool,
    check_choice,
    check_number,
    mean_off_diagonal,
    sum_off_diagonal,
)


class PartialOrder(RetrievalLoss):
    """``po``: order positives < partials < negatives by distance, with four margins.

    Formula (RUDDER paper, Eq. 1 / Sec. 3.1): ``d = 1 - s``; for every pair ``(i, j)``,
    ``j != i``, with the pair label ``L = labels[i, j]`` (:class:`rudder.labels.PairLabel`;
    caption ``i`` as the query, the batch caption of video ``j`` as the candidate), the
    *same* label governs both terms of the pair,
    ``d(t_i, v_j)`` against ``d(t_i, v_i)`` (caption anchor ``i``) and ``d(v_i, t_j)``
    against ``d(v_i, t_i)`` (video anchor ``i``), as the paper's quadruplet sum
    ``[.. d_ij ..] + [.. d_ji ..]`` under one label. With ``dp = d_ii`` and ``dc`` the
    anchor-candidate distance:

    - ``L = 2`` positive: ``[dc - dp - p]+`` (as close as the pair, up to ``p``);
    - ``L = 0`` negative: ``[n + dp - dc]+``;
    - ``L = 1`` partial (and ``L = 3`` description when ``description_as_partial``):
      ``[m1 + dp - dc]+ + [dc - dp - m2]+`` (between ``m1`` and ``m2`` farther than the
      pair);
    - ``L = 3`` with ``description_as_partial=False``: a negative.

    Each case is a band on ``x = dc - dp``: ``[low - x]+ + [x - high]+`` with
    ``(low, high)`` = ``(-inf, p)``, ``(n, inf)`` and ``(m1, m2)``.
    Margins must satisfy ``p < m1 < m2 < n``.
    Reduction (``reduction``): ``"mean"`` (default), the total over both directions divided
    by 2B(B-1), so with every off-diagonal label 0 the value equals ``mm`` with ``margin =
    n``, and the loss's scale does not grow with the batch; ``"sum"``, the total itself, as
    Eq. 1 writes it (a sum over the quadruplets; with Adam the two differ mostly through the
    learning rate they call for).
    Source: the partial-order (quadruplet) loss of the RUDDER paper (Madan et al., "A
    Multilingual Dataset for Low-Resource Text-Video Retrieval"; Akula et al.,
    arXiv:2103.05457), Eq. 1. The pair labels come from
    :func:`rudder.supervision.batch_labels`; they are asymmetric (the noun/verb
    heuristic reads the query's parts of speech), and a video anchor ``i`` reads row
    ``i`` (its own caption is the query), not column ``i``: reading ``labels[j, i]``
    for the video anchor is a different loss (docs/architecture.md, "Pair labels are per
    quadruplet"), which collapses video-to-text retrieval on the sample
    (docs/fidelity.md).
    """

    name = "po"
    requires = ("labels",)
    param_names = ("p", "m1", "m2", "n", "description_as_partial", "reduction")

    def __init__(self, p: float = 0.02, m1: float = 0.05, m2: float = 0.15, n: float = 0.2,
                 description_as_partial: bool = True, reduction: str = "mean"):
        super().__init__()
        self.p = check_number(self.name, "p", p)
        self.m1 = check_number(self.name, "m1", m1)
        self.m2 = check_number(self.name, "m2", m2)
        self.n = check_number(self.name, "n", n)
        if not self.p < self.m1 < self.m2 < self.n:
            raise LossConfigError(
                f"loss 'po': margins must satisfy p < m1 < m2 < n, got p={self.p}, "
                f"m1={self.m1}, m2={self.m2}, n={self.n}"
            )
        self.description_as_partial = check_bool(
            self.name, "description_as_partial", description_as_partial
        )
        self.reduction = check_choice(self.name, "reduction", reduction, ("mean", "sum"))

    def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per pair label value 0..3 (:class:`PairLabel`), the allowed band ``[low, high]`` of
        ``dc - dp``."""
        inf = float("inf")
        partial = (self.m1, self.m2)
        band = {
            PairLabel.NEGATIVE: (self.n, inf),
            PairLabel.PARTIAL: partial,
            PairLabel.POSITIVE: (-inf, self.p),
            PairLabel.DESCRIPTION: partial if self.description_as_partial else (self.n, inf),
        }
        low, high = zip(*(band[label] for label in sorted(PairLabel)), strict=True)
        return torch.tensor(low, dtype=torch.float64), torch.tensor(high, dtype=torch.float64)

    def compute(self, sims, labels):
        # Every case is [low - x]+ + [x - high]+ on x = dc - dp = s_aa - s_ab (module doc).
        x = sims.diagonal().view(1, -1, 1) - anchor_view(sims)
        label = labels.long().expand(2, -1, -1)  # labels[i, j] for both anchors i (doc)
        low, high = (upload(bound, sims.device, sims.dtype)[label] for bound in self.bounds())
        terms = F.relu(low - x) + F.relu(x - high)
        return (mean_off_diagonal if self.reduction == "mean" else sum_off_diagonal)(terms)
