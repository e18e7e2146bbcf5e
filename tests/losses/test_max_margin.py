"""mm, triplet, hn: hand-worked values on the batches of conftest.py."""

import pytest
import torch

from rudder import losses

from .conftest import random_batch


def test_mm_hand_worked(s3):
    # [0.2 - s_aa + s_ab]+ over the 12 off-diagonal terms:
    # caption c0: 0.2-0.9+0.5 < 0, 0.2-0.9+0.2 < 0      -> 0, 0
    # caption c1: 0.2-0.7+0.6 = 0.1, 0.2-0.7+0.1 < 0    -> 0.1, 0
    # caption c2: 0.2-0.4+0.3 = 0.1, 0.2-0.4+0.8 = 0.6  -> 0.1, 0.6
    # video v0:   0.2-0.9+0.6 < 0, 0.2-0.9+0.3 < 0      -> 0, 0
    # video v1:   0.2-0.7+0.5 = 0, 0.2-0.7+0.8 = 0.3    -> 0, 0.3
    # video v2:   0.2-0.4+0.2 = 0, 0.2-0.4+0.1 < 0      -> 0, 0
    # sum 1.1 / (2 * 3 * 2) = 0.091666...
    assert losses.build("mm")(s3).item() == pytest.approx(1.1 / 12, abs=1e-12)


def test_mm_margin_parameter(s3):
    # margin 0: only c2 -> v1 (0.8 - 0.4 = 0.4) and v1 -> c2 (0.8 - 0.7 = 0.1) violate: 0.5 / 12
    assert losses.build("mm", margin=0.0)(s3).item() == pytest.approx(0.5 / 12, abs=1e-12)


def test_hn_hand_worked(s3):
    # hardest negative per anchor, [0.2 + s_neg - s_pos]+:
    # captions: c0 max(0.5, 0.2) -> 0.2+0.5-0.9 < 0 -> 0; c1 0.6 -> 0.1; c2 0.8 -> 0.6; mean 0.7/3
    # videos:   v0 max(0.6, 0.3) -> 0.2+0.6-0.9 < 0 -> 0; v1 0.8 -> 0.3; v2 0.2 -> 0; mean 0.3/3
    # directions summed: 1.0 / 3
    assert losses.build("hn")(s3).item() == pytest.approx(1.0 / 3, abs=1e-12)


def test_hn_gradient_goes_to_the_hardest_negative_only(s3):
    sims = s3.clone().requires_grad_(True)
    losses.build("hn")(sims).backward()
    # c1 -> v0 (0.6) and c2 -> v1 (0.8) are active caption hinges (weight 1/3 each);
    # v1 -> c2 (0.8, i.e. s21) is the active video hinge (weight 1/3).
    expected = torch.zeros(3, 3, dtype=torch.float64)
    expected[1, 0] += 1 / 3
    expected[1, 1] -= 1 / 3  # c1's positive
    expected[2, 1] += 1 / 3 + 1 / 3  # c2 -> v1 and v1 -> c2
    expected[2, 2] -= 1 / 3  # c2's positive
    expected[1, 1] -= 1 / 3  # v1's positive
    assert torch.allclose(sims.grad, expected)


def test_triplet_on_two_pairs_is_deterministic(s2):
    # With B = 2 the only negative of every anchor is the other item:
    # caption c0: 0.2 + s01 - s00 = 0.2 + 0.7 - 0.8 = 0.1
    # caption c1: 0.2 + s10 - s11 = 0.2 + 0.3 - 0.6 < 0 -> 0
    # video v0:   0.2 + s10 - s00 = 0.2 + 0.3 - 0.8 < 0 -> 0
    # video v1:   0.2 + s01 - s11 = 0.2 + 0.7 - 0.6 = 0.3
    # mean over 4 anchors = 0.4 / 4 = 0.1
    loss = losses.build("triplet")
    for seed in range(5):
        value = loss(s2, generator=torch.Generator().manual_seed(seed))
        assert value.item() == pytest.approx(0.1, abs=1e-12)


def test_triplet_never_draws_the_anchor():
    # Off-diagonal similarities are far below the positives, so every real negative gives 0;
    # drawing the anchor itself would give [0.2 + s_aa - s_aa]+ = 0.2 > 0.
    sims = torch.full((5, 5), -0.5, dtype=torch.float64)
    sims.fill_diagonal_(0.9)
    loss = losses.build("triplet")
    for seed in range(50):
        assert loss(sims, generator=torch.Generator().manual_seed(seed)).item() == 0.0


def test_triplet_expectation_is_mm():
    # A uniform negative per anchor: E[triplet] = mean of the anchor's hinges, i.e. mm.
    _, _, sims = random_batch(6, seed=3)
    triplet, mm = losses.build("triplet", margin=0.5), losses.build("mm", margin=0.5)
    gen = torch.Generator().manual_seed(0)
    mean = torch.stack([triplet(sims, generator=gen) for _ in range(4000)]).mean()
    assert mean.item() == pytest.approx(mm(sims).item(), rel=0.03)


def test_triplet_same_seed_same_value():
    _, _, sims = random_batch(8, seed=1)
    loss = losses.build("triplet", margin=0.5)
    first = loss(sims, generator=torch.Generator().manual_seed(7))
    second = loss(sims, generator=torch.Generator().manual_seed(7))
    assert first.item() == second.item()
