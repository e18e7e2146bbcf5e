"""sms: hand-worked values covering the three branches of the loss."""

import pytest
import torch

from rudder import losses
from rudder.losses.sms import EPSILON


def test_sms_hand_worked_less_relevant_candidates(s3, r3):
    # Δ = R[a, a] - R_cand (all > ε here), z = 0.6 Δ - (s_aa - s_ab), term [z]+:
    # c0 (R 1.0, s 0.9): v1 Δ 0.8: 0.48-0.4 = 0.08      v2 Δ 1.0: 0.6-0.7 < 0 -> 0
    # c1 (0.8, 0.7):     v0 Δ 0.7: 0.42-0.1 = 0.32      v2 Δ 0.3: 0.18-0.6 < 0 -> 0
    # c2 (0.6, 0.4):     v0 Δ 0.6: 0.36-0.1 = 0.26      v1 Δ 0.3: 0.18+0.4 = 0.58
    # v0 (1.0, 0.9):     c1 Δ 0.9: 0.54-0.3 = 0.24      c2 Δ 1.0: 0.6-0.6 = 0
    # v1 (0.8, 0.7):     c0 Δ 0.6: 0.36-0.2 = 0.16      c2 Δ 0.5: 0.3+0.1 = 0.4
    # v2 (0.6, 0.4):     c0 Δ 0.6: 0.36-0.2 = 0.16      c1 Δ 0.1: 0.06-0.3 < 0 -> 0
    # total 2.2 / 12
    value = losses.build("sms")(s3, relevance=r3)
    assert value.item() == pytest.approx(2.2 / 12, abs=1e-12)


def test_sms_hand_worked_equal_and_more_relevant_candidates():
    sims = torch.tensor([[0.8, 0.5], [0.3, 0.6]], dtype=torch.float64)
    relevance = torch.tensor([[0.5, 0.5], [0.9, 0.6]], dtype=torch.float64)
    # c0 (R 0.5, s 0.8): v1 R[0,1] 0.5, Δ = 0 (|Δ| < ε): z = 0 - 0.3 -> [|z| - 0.1]+ = 0.2
    # c1 (R 0.6, s 0.6): v0 R[1,0] 0.9, Δ = -0.3 (more relevant): z = -0.18 - 0.3 = -0.48
    #                    -> [-z]+ = 0.48
    # v0 (R 0.5, s 0.8): c1 R[1,0] 0.9, Δ = -0.4: z = -0.24 - 0.5 = -0.74 -> 0.74
    # v1 (R 0.6, s 0.6): c0 R[0,1] 0.5, Δ = 0.1 > ε: z = 0.06 - 0.1 < 0 -> 0
    # total 1.42 / 4 = 0.355
    value = losses.build("sms")(sims, relevance=relevance)
    assert value.item() == pytest.approx(1.42 / 4, abs=1e-12)


def test_sms_epsilon_boundary():
    # |Δ| just under ε counts as equal relevance; just over ε as less relevant.
    sims = torch.tensor([[0.8, 0.5], [0.5, 0.8]], dtype=torch.float64)
    for delta, expected in [(0.99 * EPSILON, 0.3 - 0.1), (1.01 * EPSILON, 0.0)]:
        relevance = torch.tensor([[0.5, 0.5 - delta], [0.5 - delta, 0.5]], dtype=torch.float64)
        # equal: [|0.6 Δ - 0.3| - 0.1]+ ≈ 0.2; less relevant: [0.6 Δ - 0.3]+ = 0
        value = losses.build("sms")(sims, relevance=relevance).item()
        assert value == pytest.approx(expected, abs=0.01)
    assert EPSILON == pytest.approx(1.1 / 240)


def paper_sms(sims, relevance, margin=0.6, slack=0.1, band="reference", own="given"):
    """SMS as a direct loop over anchors and candidates of both directions (the three cases
    of arXiv 2406.12256; "reference": the tolerance band of xqwang14/SMS-Loss)."""
    size, total = len(sims), 0.0
    for a in range(size):
        r_a = relevance[a][a] if own == "given" else 1.0
        for b in range(size):
            if a == b:
                continue
            for s_ab, r_b in ((sims[a][b], relevance[a][b]), (sims[b][a], relevance[b][a])):
                delta = r_a - r_b
                z = delta * margin - (sims[a][a] - s_ab)
                if band == "reference":
                    less, equal = delta > EPSILON, abs(delta) < EPSILON
                else:
                    less, equal = delta > 0, delta == 0
                total += max(0.0, z) if less else max(0.0, abs(z) - slack) if equal \
                    else max(0.0, -z)
    return total / (2 * size * (size - 1))


@pytest.mark.parametrize("band", ["reference", "paper"])
@pytest.mark.parametrize("own", ["given", "one"])
def test_sms_matches_a_direct_loop(band, own):
    gen = torch.Generator().manual_seed(3)
    sims = torch.rand(6, 6, generator=gen, dtype=torch.float64)
    relevance = (torch.randint(0, 5, (6, 6), generator=gen) / 4).double()  # ties: Δ = 0 occurs
    relevance[0, 1] = relevance[0, 0] - EPSILON / 2  # inside the reference's band only
    loss = losses.build("sms", band=band, own_relevance=own)
    expected = paper_sms(sims.tolist(), relevance.tolist(), band=band, own=own)
    assert loss(sims, relevance=relevance).item() == pytest.approx(expected, abs=1e-12)


def test_sms_gap_of_exactly_the_tolerance_takes_the_pull_branch_as_the_reference():
    sims = torch.tensor([[0.8, 0.5], [0.5, 0.8]], dtype=torch.float64)
    relevance = torch.tensor([[EPSILON, 0.0], [0.0, EPSILON]], dtype=torch.float64)
    # Δ = ε exactly: neither Δ > ε nor |Δ| < ε, so [-z]+ with z = 0.6 ε - 0.3 < 0: 0.3 - 0.6 ε
    value = losses.build("sms")(sims, relevance=relevance).item()
    assert value == pytest.approx(0.3 - 0.6 * EPSILON, abs=1e-9)
    # the paper's cases: Δ > 0 is less relevant, [z]+ = 0
    assert losses.build("sms", band="paper")(sims, relevance=relevance).item() == 0.0
