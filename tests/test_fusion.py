"""rudder.fusion: rank fusion (Galanopoulos & Mezaris 2021) on hand-worked cases and identities."""

import numpy as np
import pytest
import torch

from rudder import fusion, metrics

# One query, three items, three models (higher similarity = better).
M1 = np.array([[0.9, 0.5, 0.1]])  # ranks [0, 1, 2]
M2 = np.array([[0.2, 0.8, 0.5]])  # ranks [2, 0, 1]
M3 = np.array([[0.9, 0.1, 0.5]])  # ranks [0, 2, 1]
# Ranks per item across models: item0 (0, 2, 0), item1 (1, 0, 2), item2 (2, 1, 1).


def test_rank_matrix_averages_ties():
    # 0.9 is first; the two 0.5 share positions 1 and 2 -> 1.5 each.
    np.testing.assert_array_equal(fusion.rank_matrix([[0.5, 0.9, 0.5]]), [[1.5, 0.0, 1.5]])
    # rank_matrix agrees with the metrics' tie-averaged rank of the diagonal
    s = np.random.default_rng(0).integers(0, 3, (6, 6)).astype(float)
    np.testing.assert_array_equal(np.diag(fusion.rank_matrix(s)), metrics.query_ranks(s))


def test_hand_worked_fusion():
    models = [M1, M2, M3]
    # AVG: item0 (0+2+0)/3 = 2/3, item1 (1+0+2)/3 = 1, item2 (2+1+1)/3 = 4/3.
    np.testing.assert_allclose(fusion.fuse_ranks(models, "avg"), [[-2 / 3, -1.0, -4 / 3]])
    # MAX: best rank item0 0, item1 0, item2 1.
    np.testing.assert_array_equal(fusion.fuse_ranks(models, "max"), [[0.0, 0.0, -1.0]])
    # Hybrid(2): two best ranks item0 (0, 0) -> 0, item1 (0, 1) -> 0.5, item2 (1, 1) -> 1.
    np.testing.assert_array_equal(fusion.fuse_ranks(models, "hybrid", q=2), [[0.0, -0.5, -1.0]])
    # ensemble_sum: element-wise sum 0.9+0.2+0.9, 0.5+0.8+0.1, 0.1+0.5+0.5.
    np.testing.assert_allclose(fusion.ensemble_sum(models), [[2.0, 1.4, 1.1]])


def test_hybrid_identities_on_random_models():
    rng = np.random.default_rng(3)
    models = [rng.standard_normal((7, 9)) for _ in range(4)]
    models.append(np.round(models[0]))  # a tied model
    np.testing.assert_array_equal(
        fusion.fuse_ranks(models, "hybrid", q=1), fusion.fuse_ranks(models, "max")
    )
    np.testing.assert_allclose(
        fusion.fuse_ranks(models, "hybrid", q=5), fusion.fuse_ranks(models, "avg")
    )


def test_fusion_is_blockwise_exact_and_plugs_into_metrics(monkeypatch):
    rng = np.random.default_rng(4)
    models = [rng.standard_normal((12, 12)).astype(np.float32) for _ in range(3)]
    whole = fusion.fuse_ranks(models, "hybrid", q=2)
    monkeypatch.setattr(fusion, "_BLOCK", 40)  # blocks of one row
    np.testing.assert_array_equal(fusion.fuse_ranks(models, "hybrid", q=2), whole)
    # Fusing a model with itself changes no ranking, so no metric.
    single = models[0]
    for method in ("avg", "max"):
        assert metrics.retrieval_metrics(
            fusion.fuse_ranks([single, single], method)
        ) == metrics.retrieval_metrics(single)


def test_torch_inputs_and_errors():
    t = [torch.tensor(M1), torch.tensor(M2), torch.tensor(M3)]
    np.testing.assert_array_equal(
        fusion.fuse_ranks(t, "avg"), fusion.fuse_ranks([M1, M2, M3], "avg")
    )
    with pytest.raises(ValueError, match="unknown fusion method"):
        fusion.fuse_ranks([M1], "min")
    with pytest.raises(ValueError, match="1 <= q <= 3"):
        fusion.fuse_ranks([M1, M2, M3], "hybrid", q=4)
    with pytest.raises(ValueError, match="1 <= q <= 3"):
        fusion.fuse_ranks([M1, M2, M3], "hybrid")
    with pytest.raises(ValueError, match="integer q"):
        fusion.fuse_ranks([M1, M2, M3], "hybrid", q=1.5)
    with pytest.raises(ValueError, match=r"sims_list\[2\] has NaN"):
        fusion.fuse_ranks([M1, M2, M3 * np.nan], "avg")
    with pytest.raises(ValueError, match="only used by method='hybrid'"):
        fusion.fuse_ranks([M1, M2], "avg", q=1)
    with pytest.raises(ValueError, match=r"sims_list\[1\] has shape"):
        fusion.ensemble_sum([M1, np.zeros((2, 3))])
    with pytest.raises(ValueError, match="at least one"):
        fusion.ensemble_sum([])
