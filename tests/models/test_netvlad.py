"""Masked NetVLAD and masked BatchNorm: hand-worked outputs and padding invariance."""

import math

import pytest
import torch

from rudder.models.netvlad import NetVLAD


def test_one_cluster_is_the_normalised_residual_sum():
    # K = 1: every real frame is assigned to the cluster with weight 1, so the output is
    # L2(sum_n x_n - N c): (1,0) + (0,1) - 2 * (0, 0.5) = (1, 0). The padding frame (5, 5)
    # would give (6, 5) - 3 * (0, 0.5) if it counted.
    vlad = NetVLAD(feature_size=2, cluster_size=1)
    with torch.no_grad():
        vlad.centroids.copy_(torch.tensor([[0.0, 0.5]]))
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]])
    mask = torch.tensor([[True, True, False]])
    for train in (True, False):
        vlad.train(train)
        assert torch.allclose(vlad(x, mask), torch.tensor([[1.0, 0.0]]), atol=1e-6)


def test_ghost_cluster_takes_assignment_mass():
    # One real and one ghost cluster, centroid 0, eval-mode BN with fresh statistics
    # (identity up to eps). Logits (real, ghost): x1=(1,0) -> (0, ln 3), a = 1/4;
    # x2=(0,1) -> (0, 0), a = 1/2. V = (1/4)(1,0) + (1/2)(0,1) = (1/4, 1/2) -> (1,2)/sqrt 5.
    vlad = NetVLAD(feature_size=2, cluster_size=1, ghost_clusters=1).eval()
    with torch.no_grad():
        vlad.assign_weight.copy_(torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]]))
        vlad.centroids.zero_()
    out = vlad(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]), torch.ones(1, 2, dtype=torch.bool))
    expected = torch.tensor([[1.0, 2.0]]) / math.sqrt(5.0)
    assert out.shape == (1, 2)
    assert torch.allclose(out, expected, atol=1e-4)


def test_padding_does_not_change_output_even_in_training_mode():
    torch.manual_seed(0)
    vlad = NetVLAD(feature_size=6, cluster_size=4).train()
    x = torch.randn(3, 5, 6)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    base = vlad(x, mask)
    padded_x = torch.cat([x, torch.randn(3, 4, 6) * 10], dim=1)
    padded_x[:, :5][~mask] = float("nan")  # whatever padding holds is ignored
    padded_mask = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool)], dim=1)
    assert torch.allclose(vlad(padded_x, padded_mask), base, atol=1e-6)
    # the same extra frames marked real do change it (the test can fail)
    assert not torch.allclose(
        vlad(torch.nan_to_num(padded_x), torch.ones(3, 9, dtype=torch.bool)), base
    )


def test_output_is_unit_norm_and_empty_rows_are_zero():
    torch.manual_seed(1)
    vlad = NetVLAD(feature_size=3, cluster_size=2)
    mask = torch.tensor([[True, True], [False, False], [True, False]])
    out = vlad(torch.randn(3, 2, 3), mask)
    assert out.shape == (3, 6)
    assert torch.allclose(out.norm(dim=1), torch.tensor([1.0, 0.0, 1.0]), atol=1e-6)


def test_bad_shapes_are_reported():
    vlad = NetVLAD(feature_size=3, cluster_size=2)
    with pytest.raises(ValueError, match=r"expected input \(B, N, 3\)"):
        vlad(torch.randn(2, 4, 5), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool mask of shape"):
        vlad(torch.randn(2, 4, 3), torch.ones(2, 4))
