"""relevance_margin, mimm_adaptive: hand-worked values on S3/R3 (conftest.py), identities."""

import pytest
import torch

from rudder import losses

from .conftest import random_batch


def test_relevance_margin_hand_worked(s3, r3):
    # [Δ + s_ab - s_aa]+ with Δ = 1 - R (caption anchor R[a, b], video anchor R[b, a]):
    # c0: v1 Δ 0.8: 0.8+0.5-0.9 = 0.4    v2 Δ 1.0: 1+0.2-0.9 = 0.3
    # c1: v0 Δ 0.9: 0.9+0.6-0.7 = 0.8    v2 Δ 0.5: 0.5+0.1-0.7 < 0 -> 0
    # c2: v0 Δ 1.0: 1+0.3-0.4 = 0.9      v1 Δ 0.7: 0.7+0.8-0.4 = 1.1
    # v0: c1 Δ 0.9: 0.9+0.6-0.9 = 0.6    c2 Δ 1.0: 1+0.3-0.9 = 0.4
    # v1: c0 Δ 0.8: 0.8+0.5-0.7 = 0.6    c2 Δ 0.7: 0.7+0.8-0.7 = 0.8
    # v2: c0 Δ 1.0: 1+0.2-0.4 = 0.8      c1 Δ 0.5: 0.5+0.1-0.4 = 0.2
    # total 6.9 / 12 = 0.575
    value = losses.build("relevance_margin")(s3, relevance=r3)
    assert value.item() == pytest.approx(6.9 / 12, abs=1e-12)


def test_relevance_margin_max_violation_hand_worked(s3, r3):
    # largest term per anchor: captions 0.4, 0.8, 1.1 -> mean 2.3/3; videos 0.6, 0.8, 0.8 -> 2.2/3
    # directions summed: 4.5 / 3 = 1.5
    value = losses.build("relevance_margin", max_violation=True)(s3, relevance=r3)
    assert value.item() == pytest.approx(1.5, abs=1e-12)


def test_relevance_margin_does_not_read_the_diagonal(s3, r3):
    other = r3.clone()
    other.fill_diagonal_(0.3)
    loss = losses.build("relevance_margin")
    assert loss(s3, relevance=other).item() == loss(s3, relevance=r3).item()


def test_relevance_margin_with_zero_relevance_is_margin_one():
    _, _, sims = random_batch(7, seed=2)
    zero = torch.zeros(7, 7, dtype=torch.float64)
    assert losses.build("relevance_margin")(sims, relevance=zero).item() == pytest.approx(
        losses.build("mm", margin=1.0)(sims).item(), abs=1e-12
    )
    assert losses.build("relevance_margin", max_violation=True)(
        sims, relevance=zero
    ).item() == pytest.approx(losses.build("hn", margin=1.0)(sims).item(), abs=1e-12)


def test_mimm_adaptive_hand_worked(s3, r3):
    # w_a = R[a, a] = 1.0, 0.8, 0.6 -> w_a * 0.4 = 0.4, 0.32, 0.24; terms [w_a m - (s_aa - s_ab)]+
    # c0: 0.4-(0.9-0.5) = 0,  0.4-(0.9-0.2) < 0        c1: 0.32-0.1 = 0.22,  0.32-0.6 < 0
    # c2: 0.24-0.1 = 0.14,    0.24-(0.4-0.8) = 0.64
    # v0: 0.4-(0.9-0.6) = 0.1, 0.4-0.6 < 0             v1: 0.32-0.2 = 0.12,  0.32-(0.7-0.8) = 0.42
    # v2: 0.24-(0.4-0.2) = 0.04, 0.24-0.3 < 0
    # total 1.68 / 12 = 0.14
    value = losses.build("mimm_adaptive")(s3, relevance=r3)
    assert value.item() == pytest.approx(1.68 / 12, abs=1e-12)


def test_mimm_adaptive_with_full_positive_relevance_is_mm():
    _, _, sims = random_batch(7, seed=5)
    relevance = torch.eye(7, dtype=torch.float64)
    assert losses.build("mimm_adaptive", margin=0.3)(sims, relevance=relevance).item() == (
        pytest.approx(losses.build("mm", margin=0.3)(sims).item(), abs=1e-12)
    )


def test_mimm_adaptive_own_relevance_one_is_mm(s3, r3):
    # w_a = 1 for every anchor (the EPIC convention): the adaptive margin is the plain one.
    adaptive = losses.build("mimm_adaptive", margin=0.3, own_relevance="one")
    assert adaptive(s3, relevance=r3).item() == pytest.approx(
        losses.build("mm", margin=0.3)(s3).item(), abs=1e-12)
    with pytest.raises(losses.LossConfigError, match="own_relevance"):
        losses.build("mimm_adaptive", own_relevance="1")
