"""One list of metric names; ``geometric_mean`` is a deprecated name of ``gmean_r1_r5_r10``."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from rudder import metric_names as names
from rudder import metrics, significance
from rudder.config import SELECTIONS, from_dict, load_yaml, to_dict

ROOT = Path(__file__).resolve().parents[1]
RANKS = np.array([0, 0, 1, 3, 4.5, 7, 12, 40, 60, 99], dtype=float)


def test_every_table_and_the_selection_derive_from_the_one_list():
    from app.results_tab import KS, METRICS
    from experiments import tables
    from rudder import results_table

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
    """gmean_r1_r5_r10 = gmean(R1, R5, R10) (CE); gmean_r5_r10_r50 = gmean(R5, R10, R50) (RUDDER)."""
    from rudder.selection import selection_score

    m = metrics.metrics_from_ranks(RANKS)
    # ranks < 1: 2 -> R1 = 20 (rank 0 only: 2); < 5: 5 -> 50; < 10: 6 -> 60; < 50: 8 -> 80
    assert (m["R1"], m["R5"], m["R10"], m["R50"]) == (20.0, 50.0, 60.0, 80.0)
    assert m["gmean_r1_r5_r10"] == pytest.approx((20 * 50 * 60) ** (1 / 3))
    result = {"t2v": m, "v2t": m}
    assert selection_score(result, "t2v.gmean_r5_r10_r50") == pytest.approx((50 * 60 * 80) ** (1 / 3))
    assert selection_score(result, "t2v.gmean_r1_r5_r10") == m["gmean_r1_r5_r10"]


def test_the_deprecated_name_still_computes_the_same_statistic():
    new, old = names.GMEAN_R1_R5_R10, "geometric_mean"
    assert metrics.rank_statistic(old)(RANKS) == metrics.rank_statistic(new)(RANKS)
    assert significance.bootstrap_ci(RANKS, old, n_resamples=50) == significance.bootstrap_ci(
        RANKS, new, n_resamples=50
    )


def test_an_old_config_selecting_geometric_mean_still_loads(tmp_path):
    saved = to_dict(from_dict({}))
    saved["selection"] = "v2t.geometric_mean"  # what rudder accepted and saved before
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(saved), encoding="utf-8")
    with pytest.warns(FutureWarning, match="v2t.geometric_mean.*v2t.gmean_r1_r5_r10"):
        config = from_dict(load_yaml(path))
    assert config.selection == "v2t.gmean_r1_r5_r10"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_dict({"selection": "t2v.gmean_r5_r10_r50"}).selection == "t2v.gmean_r5_r10_r50"


def committed_selections() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "experiments").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        found += [(str(path.relative_to(ROOT)), s) for s in re.findall(r"selection: *(\S+)", text)]
    return found


@pytest.mark.parametrize(("path", "selection"), committed_selections())
def test_every_committed_experiment_selection_is_still_valid(path, selection):
    assert from_dict({"selection": selection}).selection in SELECTIONS, path
