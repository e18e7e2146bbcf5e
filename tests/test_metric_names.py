"""One list of metric names; `geometric_mean` (CE's) and `gmean_r5_r10_r50` (RUDDER's) differ."""

import re
from pathlib import Path

import numpy as np
import pytest

from rudder import metric_names as names
from rudder.config import SELECTIONS, from_dict
from rudder.evaluation import metrics

ROOT = Path(__file__).resolve().parents[1]
RANKS = np.array([0, 0, 1, 3, 4.5, 7, 12, 40, 60, 99], dtype=float)


def test_every_table_and_the_selection_derive_from_the_one_list():
    from app.results_tab import KS, METRICS
    from experiments import tables
    from rudder.evaluation import results_table

    assert names.TABLE_METRICS == ("R1", "R5", "R10", "R50", "MdR", "MnR", "nDCG", "mAP")
    assert results_table.COLUMNS == tables.COLUMNS == METRICS == names.TABLE_METRICS
    assert KS == names.RECALL_KS == metrics.RECALL_KS
    assert tables.HEADERS == {"R1": "R@1", "R5": "R@5", "R10": "R@10", "R50": "R@50"}
    assert SELECTIONS == tuple(f"{d}.{n}" for d in ("t2v", "v2t") for n in names.SELECTION_METRICS)


def test_the_names_are_what_the_metrics_return():
    assert tuple(metrics.metrics_from_ranks(RANKS)) == names.RANK_STATISTICS
    sims = np.random.default_rng(0).random((6, 6))
    relevance = np.eye(6)
    assert tuple(metrics.relevance_metrics(sims, relevance)) == names.RELEVANCE_METRICS


def test_the_two_geometric_means_are_different_quantities():
    """geometric_mean = gmean(R1, R5, R10) (CE); gmean_r5_r10_r50 = gmean(R5, R10, R50)
    (RUDDER)."""
    from rudder.evaluation.selection import selection_score

    m = metrics.metrics_from_ranks(RANKS)
    # ranks < 1: 2 -> R1 = 20 (rank 0 only: 2); < 5: 5 -> 50; < 10: 6 -> 60; < 50: 8 -> 80
    assert (m["R1"], m["R5"], m["R10"], m["R50"]) == (20.0, 50.0, 60.0, 80.0)
    assert m["geometric_mean"] == pytest.approx((20 * 50 * 60) ** (1 / 3))
    result = {"t2v": m, "v2t": m}
    assert selection_score(result, "t2v.gmean_r5_r10_r50") == pytest.approx(
        (50 * 60 * 80) ** (1 / 3))
    assert selection_score(result, "t2v.geometric_mean") == m["geometric_mean"]
    assert metrics.rank_statistic("geometric_mean")(RANKS) == pytest.approx(m["geometric_mean"])


def test_the_rank_statistics_are_design_md_public_keys():
    keys = {"R1", "R5", "R10", "R50", "MdR", "MnR", "geometric_mean"}  # docs/architecture.md
    assert set(names.RANK_STATISTICS) == keys
    assert set(metrics.retrieval_metrics(np.eye(4))) == keys


def committed_selections() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "experiments").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        found += [(str(path.relative_to(ROOT)), s) for s in re.findall(r"selection: *(\S+)", text)]
    return found


@pytest.mark.parametrize(("path", "selection"), committed_selections())
def test_every_committed_experiment_selection_is_still_valid(path, selection):
    assert from_dict({"selection": selection}).selection in SELECTIONS, path
