"""``hn_exclusion``: hard negatives that are not negatives (Galanopoulos & Mezaris 2021)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._base import (
    LossConfigError,
    LossInputError,
    RetrievalLoss,
    anchor_view,
    check_choice,
    check_number,
    direction_means,
    hardest,
    off_diagonal,
    positives,
)


def excluded_pairs(text_sims: torch.Tensor, exclude_top: float) -> torch.Tensor:
    """(B, B) bool: the ``floor(exclude_top · B(B-1))`` most similar off-diagonal pairs.

    Exactly that many pairs are marked: every pair above the ``count``-th largest value,
    then the pairs equal to it in row-major order until ``count`` is reached, so the
    count never depends on ties. Pairs are ordered: with symmetric ``text_sims`` the last
    pair counted may be excluded in one order only (``scope: "dataset"`` has no such edge).
    """
    size = text_sims.shape[0]
    count = math.floor(exclude_top * size * (size - 1) + 1e-9)  # 0.7 * 90 is 62.99...
    if count == 0:
        return torch.zeros(size, size, dtype=torch.bool, device=text_sims.device)
    offdiag = off_diagonal(size, text_sims.device)
    scores = text_sims.masked_fill(~offdiag, float("-inf")).flatten()
    threshold = torch.topk(scores, count).values[-1]
    above = scores > threshold
    ties = scores == threshold
    room = count - above.sum()
    excluded = above | (ties & (torch.cumsum(ties, dim=0) <= room))
    return excluded.view(size, size)


class HardNegativeExclusion(RetrievalLoss):
    """``hn_exclusion``: ``hn`` after removing the candidates whose captions nearly match.

    Formula: a pair ``(i, j)`` is *excluded* (not a negative) when its caption-caption
    similarity ``text_sims[i, j]`` is too high -- for caption anchor ``i`` and video
    candidate ``j`` read ``(i, j)``, for video anchor ``i`` and caption candidate ``j``
    read ``(j, i)``; then per anchor and direction
    ``[margin + max_{b not excluded, b != a} s_ab - s_aa]+`` (0 when every candidate is
    excluded). "Too high" depends on ``scope``:

    - ``"dataset"`` (default, the paper's rule): ``text_sims[i, j] >= threshold``, one
      similarity value fixed over the whole training set so that the top ``exclude_top``
      fraction of the training caption pairs lies above it
      (:meth:`rudder.text.CaptionSimilarity.top_fraction_threshold`; the run computes it
      once through :meth:`run_params` and records it as ``loss.params.threshold``). Which
      pairs: ``threshold_pairs="all"`` (default) every pair of distinct training captions,
      same video included; ``"other_videos"`` the pairs of captions of different videos,
      the pairs a training batch holds (one caption per video), as the paper takes its
      threshold from caption pairs inside training batches.
      Calling the loss in this scope without ``threshold`` is an error.
    - ``"batch"``: the ``floor(exclude_top · B(B-1))`` most similar off-diagonal pairs of
      each batch (:func:`excluded_pairs`), a count per batch; ``threshold`` is unused.

    Reduction: as ``hn``: mean over the anchors of each direction, the two directions summed.
    Source: Galanopoulos & Mezaris, "Hard-negatives or Non-negatives? A Hard-negative
    Selection Strategy for Cross-modal Retrieval Using the Improved Marginal Ranking
    Loss", ICCV Workshops 2021 (exclusion of the candidates whose caption similarity to
    the anchor's caption exceeds a threshold fixed from the training set's caption pairs,
    from the hard-negative mining of VSE++'s loss). The caption similarity comes from a
    frozen text representation given by the caller (the default pipeline: TF-IDF on
    character n-grams, not the paper's sentence encoder); no gradient flows through
    ``text_sims``.
    """

    name = "hn_exclusion"
    requires = ("text_sims",)
    param_names = ("margin", "exclude_top", "scope", "threshold", "threshold_pairs")

    def __init__(self, margin: float = 0.2, exclude_top: float = 0.01, scope: str = "dataset",
                 threshold: float | None = None, threshold_pairs: str = "all"):
        super().__init__()
        self.margin = check_number(self.name, "margin", margin, low=0)
        self.exclude_top = check_number(self.name, "exclude_top", exclude_top, low=0, high=1,
                                        high_open=True)
        if scope not in ("dataset", "batch"):
            raise LossConfigError(
                "loss 'hn_exclusion': parameter 'scope' must be 'dataset' or 'batch', "
                f"got {scope!r}"
            )
        self.scope = scope
        self.threshold_pairs = check_choice(self.name, "threshold_pairs", threshold_pairs,
                                            ("all", "other_videos"))
        self.threshold = None if threshold is None else check_number(self.name, "threshold",
                                                                     threshold)

    @classmethod
    def run_params(cls, params: dict, run) -> dict:
        """``threshold``, unless given or ``scope`` is "batch": the similarity above which the
        top ``exclude_top`` of all training caption pairs lie, computed once by the run."""
        if params["scope"] != "dataset" or params["threshold"] is not None:
            return {}
        top = check_number(cls.name, "exclude_top", params["exclude_top"], low=0, high=1,
                           high_open=True)
        pairs = check_choice(cls.name, "threshold_pairs", params.get("threshold_pairs", "all"),
                             ("all", "other_videos"))
        threshold = run.caption_similarity_threshold(top, other_videos=pairs == "other_videos")
        if threshold is not None and math.isinf(threshold):  # floor(exclude_top x pairs) == 0
            raise LossConfigError(
                f"loss 'hn_exclusion': exclude_top={top} of this training set's caption pairs "
                "is less than one pair, so nothing would be excluded; raise exclude_top or "
                "use scope='batch'"
            )
        return {"threshold": threshold}

    def excluded(self, text_sims: torch.Tensor) -> torch.Tensor:
        """(B, B) bool: the pairs that are not negatives (see the class docstring)."""
        if self.scope == "batch":
            return excluded_pairs(text_sims, self.exclude_top)
        if self.threshold is None:
            raise LossInputError(
                "loss 'hn_exclusion' with scope 'dataset' needs `threshold`, the similarity "
                "above which the top exclude_top of all training caption pairs lie: "
                "CaptionSimilarity.top_fraction_threshold(training_captions, exclude_top) "
                "(the trainer sets it), or use scope='batch'"
            )
        return (text_sims >= self.threshold) & off_diagonal(text_sims.shape[0], text_sims.device)

    def compute(self, sims, text_sims):
        excluded = anchor_view(self.excluded(text_sims))
        allowed = off_diagonal(sims.shape[0], sims.device) & ~excluded
        negative = hardest(anchor_view(sims), allowed)
        return direction_means(F.relu(self.margin + negative - positives(sims)))
