"""rudder.evaluation.fusion: rank fusion (Galanopoulos & Mezaris 2021) on hand-worked cases and
identities."""

import numpy as np
import pytest
import torch

from rudder.evaluation import fusion, metrics

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
    # MAX: best rank item0 0, item1 0, item2 1; item0 and item1 tie, broken by the next-best
    # rank (item0's sorted ranks (0, 0, 2), item1's (0, 1, 2)): order item0, item1, item2,
    # scores = -position.
    np.testing.assert_array_equal(fusion.fuse_ranks(models, "max"), [[0.0, -1.0, -2.0]])
    # Hybrid(2): two best ranks item0 (0, 0) -> 0, item1 (0, 1) -> 0.5, item2 (1, 1) -> 1: no
    # tie, positions 0, 1, 2.
    np.testing.assert_array_equal(fusion.fuse_ranks(models, "hybrid", q=2), [[0.0, -1.0, -2.0]])
    # Two models, a tie on best and next-best rank broken by nothing: item0 ranks (0, 1),
    # item1 (1, 0) -> equal keys (0, 1, 0.5): they stay tied (both at position 0).
    np.testing.assert_array_equal(
        fusion.fuse_ranks([[[0.9, 0.5]], [[0.5, 0.9]]], "max"), [[0.0, 0.0]]
    )
    # MAX, a tie on best and next-best rank broken by the mean rank (three models):
    three = [[[0.9, 0.8, 0.1]], [[0.5, 0.9, 0.1]], [[0.1, 0.5, 0.9]]]
    # item ranks: item0 (0, 1, 2), item1 (1, 0, 1), item2 (2, 2, 0) -> best 0, 0, 0;
    # next-best 1, 1, 2; mean 1, 2/3, 4/3 -> order item1, item0, item2.
    np.testing.assert_array_equal(fusion.fuse_ranks(three, "max"), [[-1.0, 0.0, -2.0]])
    # fuse_similarities: element-wise sum 0.9+0.2+0.9, 0.5+0.8+0.1, 0.1+0.5+0.5.
    np.testing.assert_allclose(fusion.fuse_similarities(models), [[2.0, 1.4, 1.1]])


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
        fusion.fuse_similarities([M1, np.zeros((2, 3))])
    with pytest.raises(ValueError, match="at least one"):
        fusion.fuse_similarities([])


# Two videos with two caption slots each (rows video-major: v0c0, v0c1, v1c0, v1c1); slot v1c1
# is empty. Two models.
A = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.6], [0.0, 0.0]])
B = np.array([[0.5, 0.7], [0.9, 0.4], [0.1, 0.2], [0.0, 0.0]])
MASKS = np.array([[True, True], [True, False]])


def test_fuse_directions_hand_worked():
    t2v, v2t = fusion.fuse_directions([A, B], MASKS, "avg")
    # t2v, per caption row over the two videos: v0c0 ranks (0, 1) in A and (1, 0) in B -> AVG
    # (0.5, 0.5); v0c1 (1, 0) and (0, 1) -> (0.5, 0.5); v1c0 (1, 0) and (1, 0) -> (1, 0).
    np.testing.assert_allclose(t2v, [[-0.5, -0.5], [-0.5, -0.5], [-1.0, 0.0], [-0.5, -0.5]])
    # v2t, per video over the three valid captions. Video 0: A ranks v0c0 0, v1c0 1, v0c1 2;
    # B ranks v0c1 0, v0c0 1, v1c0 2 -> AVG v0c0 0.5, v0c1 1, v1c0 1.5. Video 1: A ranks v0c1 0,
    # v1c0 1, v0c0 2; B ranks v0c0 0, v0c1 1, v1c0 2 -> v0c0 1, v0c1 0.5, v1c0 1.5.
    np.testing.assert_allclose(v2t[:3], [[-0.5, -1.0], [-1.0, -0.5], [-1.5, -1.5]])
    assert np.isneginf(v2t[3]).all()  # the empty slot is never retrieved
    summed, none = fusion.fuse_directions([A, B], MASKS, "sum")
    np.testing.assert_allclose(summed, A + B)
    assert none is None


@pytest.mark.parametrize(("method", "q"), [("avg", None), ("max", None), ("hybrid", 2)])
def test_fuse_directions_against_a_loop_over_queries(method, q):
    """Galanopoulos & Mezaris: per query, each item's fused rank is the mean of its q best
    ranks over the models (q = Q for AVG, 1 for MAX); here written one query at a time."""
    rng = np.random.default_rng(5)
    masks = rng.random((6, 3)) < 0.7
    masks[:, 0] = True
    models = [np.round(rng.standard_normal((18, 6)), 1) for _ in range(3)]  # rounding makes ties
    keep = {"avg": 3, "max": 1, "hybrid": q}[method]

    def fused(scores_per_model):  # one query: (models, items) -> scores, higher = better
        ranks = np.array([_tied_ranks(s) for s in scores_per_model])
        if keep == len(ranks):  # AVG: minus the mean rank
            return -ranks.mean(axis=0)
        keys = []  # rudder's tie-break: mean of the keep best, next-best rank, mean rank
        for item in range(ranks.shape[1]):
            r = sorted(ranks[:, item])
            keys.append((sum(r[:keep]) / keep, r[keep], sum(r) / len(r)))
        ordered = sorted(keys)
        return -np.array([ordered.index(k) for k in keys], dtype=float)  # first equal key

    t2v, v2t = fusion.fuse_directions(models, masks, method, q)
    valid = masks.reshape(-1)
    for row in range(18):
        np.testing.assert_allclose(t2v[row], fused(np.array([m[row] for m in models])))
    for video in range(6):
        np.testing.assert_allclose(
            v2t[valid, video], fused(np.array([m[valid, video] for m in models]))
        )
    assert np.isneginf(v2t[~valid]).all()


def _tied_ranks(scores):
    """0-based rank of each item, ties given the mean of their positions."""
    return np.array([np.sum(scores > s) + (np.sum(scores == s) - 1) / 2 for s in scores])


def test_fuse_directions_errors():
    with pytest.raises(ValueError, match="4 caption slots; the matrices have 3 rows"):
        fusion.fuse_directions([A[:3], B[:3]], MASKS, "avg")
    with pytest.raises(ValueError, match="only used by method='hybrid'"):
        fusion.fuse_directions([A, B], MASKS, "sum", q=2)
    with pytest.raises(ValueError, match="unknown fusion method"):
        fusion.fuse_directions([A, B], MASKS, "min")


def test_max_fusion_first_places_count_after_the_tie_break():
    """With tie-averaged ranks and no tie-break, MAX gives every model's first item fused rank
    0, so no first place is untied and R@1 is ~0; with the tie-break it is not."""
    rng = np.random.default_rng(7)
    truth = np.eye(60)
    members = [truth + rng.normal(0, 0.9, (60, 60)) for _ in range(8)]
    member_r1 = [metrics.retrieval_metrics(m)["R1"] for m in members]
    fused_r1 = metrics.retrieval_metrics(fusion.fuse_ranks(members, "max"))["R1"]
    assert fused_r1 >= min(member_r1) > 0
    untied = fusion.fuse_ranks(members, "max")
    assert (np.sort(untied, axis=1)[:, -1] > np.sort(untied, axis=1)[:, -2]).mean() > 0.9
