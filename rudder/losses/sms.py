"""``sms``: Symmetric Multi-Similarity loss (Wang et al., EPIC-KITCHENS-100 MIR 2024)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import (
    RetrievalLoss,
    anchor_view,
    check_choice,
    check_number,
    mean_off_diagonal,
    positives,
)

EPSILON = 1.1 / 240  # the reference code's relevance quantisation step (uint8 * 240)


class SymmetricMultiSimilarity(RetrievalLoss):
    """``sms``: push or pull each candidate by how its relevance compares with the positive's.

    Formula: for every anchor ``a`` and candidate ``b != a`` in both directions, with
    ``Δ = R_a - R_b`` (``R_a = relevance[a, a]``, the positive's relevance, or 1 with
    ``own_relevance="one"``; ``R_b = relevance[a, b]`` for a caption anchor,
    ``relevance[b, a]`` for a video anchor) and ``z = Δ · margin - (s_aa - s_ab)``:
    ``[z]+`` if the candidate is less relevant (keep it ``Δ·margin`` below),
    ``[|z| - slack]+`` if it is as relevant (keep it within ``slack``),
    ``[-z]+`` otherwise (more relevant: it may not fall below). ``band`` decides "as
    relevant": ``"reference"`` (default, the reference code): ``|Δ| < ε``, ``ε = 1.1/240``,
    less relevant ``Δ > ε``, and a gap of exactly ``ε`` takes the third branch, as there;
    ``"paper"`` (the cases as arXiv 2406.12256 defines them): ``Δ = 0`` exactly, less
    relevant ``Δ > 0``.
    ``own_relevance``: ``"given"`` (default) reads the diagonal, the caption's relevance to
    its own video (1 on EPIC-KITCHENS-100, where a clip's narration is its class source;
    0.5 or 0 for a RUDDER caption without verbs, or without classes); ``"one"`` takes it
    as 1, the EPIC convention, on any data.
    Reduction: mean over the 2B(B-1) off-diagonal terms.
    Source: Wang, Wang, Chau, "Symmetric Multi-Similarity Loss for EPIC-KITCHENS-100
    Multi-Instance Retrieval Challenge 2024" (arXiv 2406.12256); reference
    ``SymmetricMultiSimiliarityLoss`` in avion/losses/losses.py of xqwang14/SMS-Loss
    (``thres`` is ``slack``; ``ε`` is its ``1.1 / uint_factor``; its ``weight`` the
    positive's relevance). Deliberate deviation: the reference looks relevances up in a
    uint8 matrix quantised to 1/240 (so no gap there equals ``ε``); here ``relevance`` is
    used as given. The paper's test-time augmentation (scores averaged with those of the
    horizontally flipped video) has no counterpart on precomputed expert features.
    """

    name = "sms"
    requires = ("relevance",)
    param_names = ("margin", "slack", "band", "own_relevance")

    def __init__(self, margin: float = 0.6, slack: float = 0.1, band: str = "reference",
                 own_relevance: str = "given"):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)
        self.slack = check_number(self.name, "slack", slack, low=0)
        self.band = check_choice(self.name, "band", band, ("reference", "paper"))
        self.own_relevance = check_choice(self.name, "own_relevance", own_relevance,
                                          ("given", "one"))

    def compute(self, sims, relevance):
        own = (relevance.diagonal() if self.own_relevance == "given"
               else torch.ones_like(relevance.diagonal()))
        delta = own.view(1, -1, 1) - anchor_view(relevance)
        z = delta * self.margin - (positives(sims) - anchor_view(sims))
        tolerance = EPSILON if self.band == "reference" else 0.0
        equal = delta.abs() < EPSILON if self.band == "reference" else delta == 0
        terms = torch.where(
            delta > tolerance,
            F.relu(z),
            torch.where(equal, F.relu(z.abs() - self.slack), F.relu(-z)),
        )
        return mean_off_diagonal(terms)
