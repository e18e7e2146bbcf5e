"""dw: hand-worked sampling weights and loss; equality with pytorch-metric-learning's miner."""

import math

import pytest
import torch

from rudder import losses
from rudder.losses.distance_weighted import negative_probabilities, sample_rows

from .conftest import random_batch


def _row_probabilities(sims, dim, **kw):
    return losses.build("dw", dim=dim, **kw).probabilities(sims)


def test_probabilities_dim_2_hand_worked(s3):
    # dim = 2: log w = 0 * log d - (-1/2) log(1 - d²/4), so w = sqrt(1 - d²/4) = sqrt((1 + s)/2)
    # (d² = 2 - 2s). Caption anchor c0, negatives v1 (s 0.5, d = 1.0) and v2 (s 0.2, d = 1.265),
    # both inside [cutoff 0.5, nonzero_loss_cutoff 1.4):
    # w = sqrt(0.75) = 0.866025, sqrt(0.6) = 0.774597 -> p = 0.527864, 0.472136
    probs = _row_probabilities(s3, dim=2)
    w1, w2 = math.sqrt(0.75), math.sqrt(0.6)
    assert probs[0, 0].tolist() == pytest.approx([0.0, w1 / (w1 + w2), w2 / (w1 + w2)], abs=1e-12)


def test_probabilities_dim_3_hand_worked(s3):
    # dim = 3: w = d^-1 (the second factor has exponent 0).
    # Video anchor v2 reads column 2: c0 (s 0.2, d = sqrt(1.6) = 1.264911), c1 (s 0.1,
    # d = sqrt(1.8) = 1.341641): w = 0.790569, 0.745356 -> p = 0.514719, 0.485281
    probs = _row_probabilities(s3, dim=3)
    w0, w1 = 1 / math.sqrt(1.6), 1 / math.sqrt(1.8)
    assert probs[1, 2].tolist() == pytest.approx([w0 / (w0 + w1), w1 / (w0 + w1), 0.0], abs=1e-12)


def test_cutoffs_and_fallback():
    sims = torch.tensor(
        [
            [1.0, 0.95, -0.2],  # c0: v1 d = sqrt(0.1) = 0.316 < cutoff, v2 d = sqrt(2.4) = 1.549
            [-0.3, 1.0, -0.5],  # c1: v0 d = sqrt(2.6) = 1.61, v2 d = sqrt(3) = 1.73: both >= 1.4
            [0.5, 0.2, 1.0],
        ],
        dtype=torch.float64,
    )
    probs = _row_probabilities(sims, dim=3)
    # c0: v2 is past nonzero_loss_cutoff (weight 0); v1 alone keeps weight -> probability 1.
    assert probs[0, 0].tolist() == pytest.approx([0.0, 1.0, 0.0])
    # c1: no negative keeps weight -> uniform over the two negatives.
    assert probs[0, 1].tolist() == pytest.approx([0.5, 0.0, 0.5])
    # The cutoff clips d from below: d = 0.316 and d = 0.4 weigh the same as d = 0.5.
    dist = torch.tensor([[[0.0, 0.316, 0.4, 0.5, 1.0]]], dtype=torch.float64)
    dist = dist.expand(1, 5, 5).clone()
    dist.diagonal(dim1=-2, dim2=-1).zero_()
    p = negative_probabilities(dist, dim=3, cutoff=0.5, nonzero_loss_cutoff=1.4)[0, 0]
    # weights 1/0.5, 1/0.5, 1/0.5, 1/1.0 = 2, 2, 2, 1 -> total 7
    assert p.tolist() == pytest.approx([0.0, 2 / 7, 2 / 7, 2 / 7, 1 / 7])


def test_dw_loss_on_two_pairs_hand_worked(s2):
    # B = 2: the single negative is drawn with probability 1.
    # d = sqrt(2 - 2s): d00 = sqrt(0.4) = 0.6324555, d11 = sqrt(0.8) = 0.8944272,
    # d01 = sqrt(0.6) = 0.7745967, d10 = sqrt(1.4) = 1.1832160.
    # c0: [0.2 + d00 - d01]+ = 0.0578589      c1: [0.2 + d11 - d10]+ = 0 (-0.0887888)
    # v0: [0.2 + d00 - d10]+ = 0              v1: [0.2 + d11 - d01]+ = 0.3198305
    # mean over 4 anchors = 0.3776894 / 4 = 0.0944223
    loss = losses.build("dw", dim=16)
    value = loss(s2, generator=torch.Generator().manual_seed(0))
    expected = (0.2 + math.sqrt(0.4) - math.sqrt(0.6) + 0.2 + math.sqrt(0.8) - math.sqrt(0.6)) / 4
    assert value.item() == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.0944223, abs=1e-7)


def test_sample_rows_follows_the_probabilities():
    probs = torch.tensor([[0.0, 0.25, 0.75], [0.5, 0.0, 0.5]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    draws = torch.cat([sample_rows(probs, gen) for _ in range(4000)], dim=1)
    freq0 = torch.bincount(draws[0], minlength=3).double() / 4000
    freq1 = torch.bincount(draws[1], minlength=3).double() / 4000
    assert freq0[0] == 0 and freq1[1] == 0  # zero-probability entries are never drawn
    assert freq0.tolist() == pytest.approx([0.0, 0.25, 0.75], abs=0.03)
    assert freq1.tolist() == pytest.approx([0.5, 0.0, 0.5], abs=0.03)


def _pml_weights(embeddings, ref_emb, monkeypatch):
    """The per-row weights DistanceWeightedMiner hands to its triplet sampler."""
    from pytorch_metric_learning.miners import DistanceWeightedMiner
    from pytorch_metric_learning.miners import distance_weighted_miner as module

    captured = {}

    def capture(labels, ref_labels=None, weights=None, **kwargs):
        captured["weights"] = weights

    monkeypatch.setattr(module.lmu, "get_random_triplet_indices", capture)
    labels = torch.arange(embeddings.shape[0])
    DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4).mine(
        embeddings, labels, ref_emb, labels
    )
    return captured["weights"]


@pytest.mark.parametrize("dim", [3, 8])
def test_probabilities_equal_pytorch_metric_learning(dim, monkeypatch):
    text, video, sims = random_batch(10, seed=dim, dim=dim)
    ours = losses.build("dw", dim=dim).probabilities(sims)
    for direction, (anchors, candidates) in enumerate([(text, video), (video, text)]):
        theirs = _pml_weights(anchors, candidates, monkeypatch)
        defined = torch.isfinite(theirs).all(dim=1)  # PML divides 0 by 0 on all-zero rows
        assert defined.sum() >= 8
        assert torch.allclose(ours[direction][defined], theirs[defined], atol=1e-9)
