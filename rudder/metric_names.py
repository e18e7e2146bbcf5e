"""The names of rudder's retrieval metrics, in one place (their values:
:mod:`rudder.evaluation.metrics`).

Every list of metric names (result tables, the app, model selection) derives from these.

- ``R1 R5 R10 R50`` (recall at K), ``MdR MnR`` (median, mean rank; lower is better) and
  ``geometric_mean``, gmean(R1, R5, R10): Collaborative Experts' ``cols2metrics`` (Liu et
  al., BMVC 2019), which names the last ``geometric_mean_R1-R5-R10``.
- ``nDCG mAP``: the EPIC-KITCHENS-100 multi-instance retrieval metrics (Damen et al., IJCV
  2022), from the relevance of noun/verb classes.
- ``gmean_r5_r10_r50`` and ``gmean_mdr_mnr``: the RUDDER paper's two model-selection criteria
  (Akula et al., arXiv:2103.05457), computed from the others by the trainer.

``geometric_mean`` keeps the name docs/architecture.md's public API gives it (the key of
``retrieval_metrics``); it is *not* RUDDER's selection criterion ``gmean_r5_r10_r50``, whose
name says which recalls it averages.
"""

from __future__ import annotations

RECALL_KS = (1, 5, 10, 50)
RECALLS = tuple(f"R{k}" for k in RECALL_KS)
RANK_AVERAGES = ("MdR", "MnR")  # lower is better
GEOMETRIC_MEAN = "geometric_mean"  # gmean(R1, R5, R10), CE's
# What rudder.evaluation.metrics.retrieval_metrics / metrics_from_ranks return, in this order.
RANK_STATISTICS = (*RECALLS, *RANK_AVERAGES, GEOMETRIC_MEAN)
RELEVANCE_METRICS = ("nDCG", "mAP")
# The columns of result tables (console, experiments, app).
TABLE_METRICS = (*RECALLS, *RANK_AVERAGES, *RELEVANCE_METRICS)
# RUDDER's model-selection criteria (rudder.evaluation.selection.selection_score).
GMEAN_R5_R10_R50 = "gmean_r5_r10_r50"
GMEAN_MDR_MNR = "gmean_mdr_mnr"
SELECTION_METRICS = (GMEAN_R5_R10_R50, GMEAN_MDR_MNR, *RANK_STATISTICS, *RELEVANCE_METRICS)
LOWER_IS_BETTER = RANK_AVERAGES
