"""``sms``: Symmetric Multi-Similarity loss (Wang et al., EPIC-KITCHENS-100 MIR 2024)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import RetrievalLoss, anchor_view, check_number, mean_off_diagonal, positives

EPSILON = 1.1 / 240  # the reference code's relevance quantisation step (uint8 * 240)


class SymmetricMultiSimilarity(RetrievalLoss):
    """``sms``: push or pull each candidate by how its relevance compares with the positive's.

    Formula: for every anchor ``a`` and candidate ``b != a`` in both directions, with
    ``Δ = relevance[a, a] - R_b`` (``R_b = relevance[a, b]`` for a caption anchor,
    ``relevance[b, a]`` for a video anchor) and ``z = Δ · margin - (s_aa - s_ab)``:
    ``[z]+`` if ``Δ > ε`` (the candidate is less relevant: keep it ``Δ·margin`` below),
    ``[|z| - slack]+`` if ``|Δ| < ε`` (as relevant: keep it within ``slack``),
    ``[-z]+`` otherwise (more relevant: it may not fall below), ``ε = 1.1/240``.
    Reduction: mean over the 2B(B-1) off-diagonal terms.
    Source: Wang, Wang, Chau, "Symmetric Multi-Similarity Loss for EPIC-KITCHENS-100
    Multi-Instance Retrieval Challenge 2024" (arXiv 2406.12256); reference
    ``SymmetricMultiSimiliarityLoss`` in avion/losses/losses.py of xqwang14/SMS-Loss
    (``thres`` is ``slack``; ``ε`` is its ``1.1 / uint_factor``). Deliberate deviation:
    the reference looks relevances up in a uint8 matrix quantised to 1/240; here
    ``relevance`` is used as given.
    """

    name = "sms"
    requires = ("relevance",)
    param_names = ("margin", "slack")

    def __init__(self, margin: float = 0.6, slack: float = 0.1):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)
        self.slack = check_number(self.name, "slack", slack, low=0)

    def compute(self, sims, relevance):
        delta = relevance.diagonal().view(1, -1, 1) - anchor_view(relevance)
        z = delta * self.margin - (positives(sims) - anchor_view(sims))
        terms = torch.where(
            delta > EPSILON,
            F.relu(z),
            torch.where(delta.abs() < EPSILON, F.relu(z.abs() - self.slack), F.relu(-z)),
        )
        return mean_off_diagonal(terms)
