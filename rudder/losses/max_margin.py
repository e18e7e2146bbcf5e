"""Max-margin ranking losses on cosine similarities: ``mm``, ``triplet`` and ``hn``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import (
    RetrievalLoss,
    anchor_view,
    check_number,
    direction_means,
    hardest,
    mean_off_diagonal,
    off_diagonal,
    positives,
)


class MaxMargin(RetrievalLoss):
    """``mm``: bidirectional max-margin ranking loss over every in-batch negative.

    Formula: for anchors ``a`` and candidates ``b != a`` in both directions,
    ``[margin - s_aa + s_ab]+`` (caption anchor, video candidate) and
    ``[margin - s_aa + s_ba]+`` (video anchor, caption candidate).
    Reduction: mean over the 2B(B-1) off-diagonal terms.
    Source: Collaborative Experts (Liu et al., BMVC 2019), ``MaxMarginRankingLoss`` with
    ``fix_norm=True`` (model/loss.py of albanie/collaborative-experts, itself from Miech et
    al.'s Mixture-of-Embedding-Experts), which drops the B diagonal zeros before the mean.
    No deviation.
    """

    name = "mm"
    param_names = ("margin",)

    def __init__(self, margin: float = 0.2):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)

    def compute(self, sims):
        terms = F.relu(self.margin - positives(sims) + anchor_view(sims))
        return mean_off_diagonal(terms)


class Triplet(RetrievalLoss):
    """``triplet``: one random in-batch negative per anchor, both directions.

    Formula: for every anchor ``a`` (B caption anchors and B video anchors) a candidate
    ``n != a`` drawn uniformly from the other B-1 with ``generator``;
    ``[margin + s_an - s_aa]+`` with ``s_an = sims[a, n]`` for a caption anchor and
    ``sims[n, a]`` for a video anchor.
    Reduction: mean over the 2B anchors.
    Source: the triplet ranking loss (Schroff et al., FaceNet, CVPR 2015, the triplet loss
    of Sec. 3.1, here on cosine similarity) with uniformly random in-batch negatives, the
    random-sampling baseline the RUDDER paper compares against.
    The sampling is not differentiated; only the similarities are.
    """

    name = "triplet"
    requires = ("generator",)
    param_names = ("margin",)

    def __init__(self, margin: float = 0.2):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)

    def compute(self, sims, generator):
        size = sims.shape[0]
        draw = torch.randint(0, size - 1, (2, size, 1), generator=generator, device=sims.device)
        anchors = torch.arange(size, device=sims.device).view(1, -1, 1)
        negatives = draw + (draw >= anchors).long()  # skip the anchor's own index
        s_neg = anchor_view(sims).gather(-1, negatives)
        return F.relu(self.margin + s_neg - positives(sims)).mean()


class HardNegative(RetrievalLoss):
    """``hn``: VSE++ hardest in-batch negative.

    Formula: per anchor and direction, ``[margin + max_{b != a} s_ab - s_aa]+`` (caption
    anchors read row ``a`` of ``sims``, video anchors column ``a``).
    Reduction: mean over the B anchors of each direction, the two directions summed.
    Source: Faghri et al., VSE++ (BMVC 2018), the max-of-hinges loss (MH), reference
    ``ContrastiveLoss(max_violation=True)`` of fartashf/vsepp, which sums over anchors; the
    mean (as in the RAN/RANP code, ``average_batch=True``) makes the value independent of B.
    When several negatives tie for hardest the gradient is shared among them.
    """

    name = "hn"
    param_names = ("margin",)

    def __init__(self, margin: float = 0.2):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)

    def compute(self, sims):
        negative = hardest(anchor_view(sims), off_diagonal(sims.shape[0], sims.device))
        return direction_means(F.relu(self.margin + negative - positives(sims)))
