"""``po``: the RUDDER partial-order quadruplet loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import (
    LossConfigError,
    RetrievalLoss,
    anchor_view,
    check_bool,
    check_number,
    mean_off_diagonal,
)


class PartialOrder(RetrievalLoss):
    """``po``: order positives < partials < negatives by distance, with four margins.

    Formula: ``d = 1 - s``; for every anchor ``a`` (caption or video) and candidate
    ``b != a``, with the pair's label ``L`` read by the anchor/candidate rule
    (``labels[a, b]`` for a caption anchor and video candidate, ``labels[b, a]`` for a
    video anchor and caption candidate), ``dp = d_aa`` and ``dc`` the anchor-candidate
    distance:

    - ``L = 2`` positive: ``[dc - dp - p]+`` (as close as the pair, up to ``p``);
    - ``L = 0`` negative: ``[n + dp - dc]+``;
    - ``L = 1`` partial (and ``L = 3`` description when ``description_as_partial``):
      ``[m1 + dp - dc]+ + [dc - dp - m2]+`` (between ``m1`` and ``m2`` farther than the
      pair);
    - ``L = 3`` with ``description_as_partial=False``: a negative.

    Each case is a band on ``x = dc - dp``: ``[low - x]+ + [x - high]+`` with
    ``(low, high)`` = ``(-inf, p)``, ``(n, inf)`` and ``(m1, m2)``.
    Margins must satisfy ``p < m1 < m2 < n``.
    Reduction: the total over both directions divided by 2B(B-1), so with every
    off-diagonal label 0 the value equals ``mm`` with ``margin = n``.
    Source: the partial-order (quadruplet) loss of the RUDDER paper ("RUDDER: A Cross
    Lingual Video and Text Retrieval Dataset"), in the form specified by issue 3.
    Deliberate deviation from the issue's wording: the issue sums both terms of a pair
    ``(i, j)`` under ``labels[i, j]``; here the video-anchor term (video ``i`` vs
    caption ``j``) reads ``labels[j, i]``, DESIGN.md's anchor/candidate rule, since a
    label belongs to a (caption, video) pair whatever the direction. The two agree
    whenever ``labels`` is symmetric.
    """

    name = "po"
    requires = ("labels",)
    param_names = ("p", "m1", "m2", "n", "description_as_partial")

    def __init__(self, p: float = 0.02, m1: float = 0.05, m2: float = 0.15, n: float = 0.2,
                 description_as_partial: bool = True):
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

    def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per label value 0..3, the allowed band ``[low, high]`` of ``dc - dp``."""
        inf = float("inf")
        description = (self.m1, self.m2) if self.description_as_partial else (self.n, inf)
        low = torch.tensor([self.n, self.m1, -inf, description[0]], dtype=torch.float64)
        high = torch.tensor([inf, self.m2, self.p, description[1]], dtype=torch.float64)
        return low, high

    def compute(self, sims, labels):
        # Every case is [low - x]+ + [x - high]+ on x = dc - dp = s_aa - s_ab (module doc).
        x = sims.diagonal().view(1, -1, 1) - anchor_view(sims)
        label = anchor_view(labels).long()
        low, high = (bound.to(sims.device, sims.dtype)[label] for bound in self.bounds())
        return mean_off_diagonal(F.relu(low - x) + F.relu(x - high))
