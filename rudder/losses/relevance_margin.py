"""Margins set by relevance: ``relevance_margin`` and ``mimm_adaptive``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import (
    RetrievalLoss,
    anchor_view,
    check_bool,
    check_choice,
    check_number,
    direction_means,
    hardest,
    mean_off_diagonal,
    off_diagonal,
    positives,
)


class RelevanceMargin(RetrievalLoss):
    """``relevance_margin``: triplet loss whose margin shrinks with the negative's relevance.

    Formula: for every anchor ``a`` and candidate ``b != a`` in both directions,
    ``[Δ_ab + s_ab - s_aa]+`` with ``Δ_ab = 1 - R(a, b)`` (``relevance[a, b]`` for a
    caption anchor, ``relevance[b, a]`` for a video anchor). The positive is taken as
    fully relevant (R = 1, docs/architecture.md), so ``relevance``'s diagonal is not read.
    Reduction: mean over the 2B(B-1) off-diagonal terms of both directions; with
    ``max_violation`` only the largest term per anchor is kept, then the mean over the
    anchors of each direction, the two directions summed (VSE++'s max-violation
    reduction, as ``hn``). Either way, with zero relevance the value is
    ``mm`` (resp. ``hn``) with margin 1.
    Source: Falcon, Sudhakaran, Serra, Escalera, Lanz, "Relevance-based Margin for
    Contrastively-trained Video Retrieval Models", ICMR 2022 (the relevance-based margin
    ``Δ = 1 - R``); reference: ``delta = 1 - get_relevances(anchor, negative)`` passed as
    the margin of ``TripletLoss`` (src/train/train_mmen_tripletRelBased.py and
    src/losses/triplet.py of aranciokov/RelevanceMargin-ICMR22). Deliberate deviations:
    the reference samples triplets from the dataset and, for MMEN/JPoSE, compares squared
    Euclidean distances; here every in-batch candidate is a negative and the cosine form
    is used (the reference's ``cos_sim=True`` branch).
    """

    name = "relevance_margin"
    requires = ("relevance",)
    param_names = ("max_violation",)

    def __init__(self, max_violation: bool = False):
        super().__init__()
        self.max_violation = check_bool(self.name, "max_violation", max_violation)

    def compute(self, sims, relevance):
        shifted = (1 - anchor_view(relevance)) + anchor_view(sims)  # Δ_ab + s_ab
        if self.max_violation:
            worst = hardest(shifted, off_diagonal(sims.shape[0], sims.device))
            return direction_means(F.relu(worst - positives(sims)))
        return mean_off_diagonal(F.relu(shifted - positives(sims)))


class AdaptiveMaxMargin(RetrievalLoss):
    """``mimm_adaptive``: max-margin with the margin scaled by the positive's relevance.

    Formula: for every anchor ``a`` and candidate ``b != a`` in both directions,
    ``[w_a · margin - (s_aa - s_ab)]+`` with ``w_a = relevance[a, a]`` (the relevance of
    caption ``a`` to its own video; ``s_ab`` read by the anchor/candidate rule).
    ``own_relevance="one"`` takes ``w_a = 1``: the EPIC-KITCHENS-100 convention (a clip's
    narration is its class source, so its relevance is 1) on any data; then the loss is
    ``mm``. With ``"given"`` (default) a RUDDER caption without verbs has ``w_a`` 0.5 or 0.
    Reduction: mean over the 2B(B-1) off-diagonal terms.
    Source: EgoVLP (Lin et al., "Egocentric Video-Language Pretraining", NeurIPS 2022),
    the adaptive MI-MM loss used on EPIC-KITCHENS-100 MIR; reference
    ``AdaptiveMaxMarginRankingLoss(fix_norm=True)`` (``weight`` = the batch's positive
    relevances), as in avion/losses/losses.py of xqwang14/SMS-Loss. No deviation.
    """

    name = "mimm_adaptive"
    requires = ("relevance",)
    param_names = ("margin", "own_relevance")

    def __init__(self, margin: float = 0.4, own_relevance: str = "given"):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)
        self.own_relevance = check_choice(self.name, "own_relevance", own_relevance,
                                          ("given", "one"))

    def compute(self, sims, relevance):
        own = relevance.diagonal()
        weight = (own if self.own_relevance == "given" else torch.ones_like(own)).view(1, -1, 1)
        terms = F.relu(weight * self.margin - (positives(sims) - anchor_view(sims)))
        return mean_off_diagonal(terms)
