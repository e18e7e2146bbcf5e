"""Relevance-aware online mining (Falcon et al., ICIAP 2022): ``ran`` and ``ranp``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import (
    RetrievalLoss,
    anchor_view,
    check_number,
    direction_means,
    hardest,
    off_diagonal,
    positives,
)


def _relevant(sims: torch.Tensor, relevance: torch.Tensor, tau: float):
    """(2, B, B) off-diagonal candidates with relevance >= tau, and those below (negatives)."""
    offdiag = off_diagonal(sims.shape[0], sims.device)
    relevant = anchor_view(relevance) >= tau
    return offdiag & relevant, offdiag & ~relevant


class RelevanceAwareNegatives(RetrievalLoss):
    """``ran``: hardest negative among the candidates that are not relevant.

    Formula: per anchor and direction, ``[margin + max_{b in N(a)} s_ab - s_aa]+`` where
    ``N(a)`` are the candidates ``b != a`` with relevance ``< tau`` (``relevance[a, b]``
    for a caption anchor, ``relevance[b, a]`` for a video anchor); 0 when ``N(a)`` is empty.
    Reduction: mean over the anchors of each direction, the two directions summed (as
    ``hn``, which it equals when no relevance reaches ``tau``).
    Source: Falcon, Serra, Lanz, "Learning Video Retrieval Models with Relevance-Aware
    Online Mining", ICIAP 2022, Eq. 5; reference ``ContrastiveLoss(max_violation=True)``
    with ``batch_relevance`` in t2vretrieval/models/criterion.py of aranciokov/ranp
    (costs of candidates with relevance >= threshold set to 0). The value has no deviation;
    at candidates tied exactly for the hardest, the gradient is shared among them
    (``hardest``), where the reference's ``topk`` gives it to one.
    """

    name = "ran"
    requires = ("relevance",)
    param_names = ("margin", "tau")

    def __init__(self, margin: float = 0.2, tau: float = 0.15):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)
        self.tau = check_number(self.name, "tau", tau, low=0, high=1)

    def compute(self, sims, relevance):
        _, negatives = _relevant(sims, relevance, self.tau)
        negative = hardest(anchor_view(sims), negatives)
        return direction_means(F.relu(self.margin + negative - positives(sims)))


class RelevanceAwareNegativesPositives(RetrievalLoss):
    """``ranp``: ``ran`` plus a hard-positive term.

    Formula: the ``ran`` term (hardest non-relevant negative, ``margin``) plus, per anchor
    and direction, ``[margin_pos + max_{b in N(a)} s_ab - s_hp(a)]+`` where the hardest
    positive ``s_hp(a) = min_{b in P(a)} s_ab`` over the off-diagonal candidates with
    relevance ``>= tau``. Where ``P(a)`` is empty, ``s_hp(a) = 1``, as the authors' code
    does (it fills non-positives with 1 before the ``min``); where ``N(a)`` is empty the
    term is 0.
    Reduction: each term as ``ran`` (mean over the anchors of each direction, the two
    directions summed); value = RAN term + hard-positive term.
    Source: Falcon, Serra, Lanz, ICIAP 2022, Eqs. 6-8; reference ``ContrastiveLossHP``
    (``max_violation=True``, ``average_batch=True``) in t2vretrieval/models/criterion.py
    of aranciokov/ranp, which returns the two terms that the training code adds.
    The value has no deviation; tied hardest candidates share the gradient, as in ``ran``.
    """

    name = "ranp"
    requires = ("relevance",)
    param_names = ("margin", "margin_pos", "tau")

    def __init__(self, margin: float = 0.2, margin_pos: float = 0.2, tau: float = 0.15):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)
        self.margin_pos = check_number(self.name, "margin_pos", margin_pos, low=0)
        self.tau = check_number(self.name, "tau", tau, low=0, high=1)

    def compute(self, sims, relevance):
        relevant, negatives = _relevant(sims, relevance, self.tau)
        view = anchor_view(sims)
        negative = hardest(view, negatives)
        hard_positive = -hardest(-view, relevant)  # +inf where there is none
        hard_positive = torch.where(torch.isinf(hard_positive), 1.0, hard_positive)
        ran = direction_means(F.relu(self.margin + negative - positives(sims)))
        return ran + direction_means(F.relu(self.margin_pos + negative - hard_positive))
