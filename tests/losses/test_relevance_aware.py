"""ran, ranp: hand-worked values on S3/R3 (conftest.py), identities with hn."""

import pytest
import torch

from rudder import losses

from .conftest import random_batch

# tau = 0.15 splits the candidates of R3 (video anchors read R3[b, a]):
#   caption c0: v1 R 0.2 relevant, v2 R 0.0 negative
#   caption c1: v0 R 0.1 negative, v2 R 0.5 relevant
#   caption c2: v0 R 0.0 negative, v1 R 0.3 relevant
#   video v0:   c1 R 0.1 negative, c2 R 0.0 negative
#   video v1:   c0 R 0.2 relevant, c2 R 0.3 relevant     (no negative)
#   video v2:   c0 R 0.0 negative, c1 R 0.5 relevant


def test_ran_hand_worked(s3, r3):
    # hardest non-relevant negative, [0.2 + s_neg - s_pos]+:
    # c0: v2 0.2 -> 0.2+0.2-0.9 < 0 -> 0;  c1: v0 0.6 -> 0.1;  c2: v0 0.3 -> 0.1; mean 0.2/3
    # v0: max(0.6, 0.3) -> 0.2+0.6-0.9 < 0 -> 0;  v1: none -> 0;  v2: c0 0.2 -> 0.2+0.2-0.4 = 0
    # total 0.2 / 3 (hn on the same sims is 1/3: the relevant 0.8 candidates are skipped)
    assert losses.build("ran")(s3, relevance=r3).item() == pytest.approx(0.2 / 3, abs=1e-12)


def test_ranp_hand_worked(s3, r3):
    # hardest positive (least similar relevant candidate; 1 when none) against the hardest
    # negative, [0.2 + s_neg - s_hp]+:
    # c0: hp v1 0.5, neg 0.2 -> 0.2+0.2-0.5 < 0 -> 0
    # c1: hp v2 0.1, neg 0.6 -> 0.2+0.6-0.1 = 0.7
    # c2: hp v1 0.8, neg 0.3 -> 0.2+0.3-0.8 < 0 -> 0          caption mean 0.7/3
    # v0: no relevant -> hp 1, neg 0.6 -> 0.2+0.6-1 < 0 -> 0
    # v1: no negative -> 0
    # v2: hp c1 0.1, neg c0 0.2 -> 0.2+0.2-0.1 = 0.3            video mean 0.3/3
    # ranp = ran + hp term = 0.2/3 + 1.0/3 = 0.4
    assert losses.build("ranp")(s3, relevance=r3).item() == pytest.approx(0.4, abs=1e-12)


def test_ranp_hardest_positive_defaults_to_one(s3, r3):
    # margin_pos = 0.5: c0 0.5+0.2-0.5 = 0.2, c1 0.5+0.6-0.1 = 1.0, c2 0.5+0.3-0.8 = 0 -> 1.2/3
    # v0 (no relevant, hp = 1): 0.5+0.6-1 = 0.1, v1 0, v2 0.5+0.2-0.1 = 0.6           -> 0.7/3
    # ranp = 0.2/3 + 1.9/3 = 0.7
    loss = losses.build("ranp", margin_pos=0.5)
    assert loss(s3, relevance=r3).item() == pytest.approx(0.7, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_ran_without_relevant_candidates_is_hn(seed):
    _, _, sims = random_batch(8, seed=seed)
    relevance = torch.rand(8, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    relevance = 0.149 * relevance  # all below tau = 0.15
    relevance.fill_diagonal_(1.0)  # the diagonal is the positive, never a negative
    ran = losses.build("ran", margin=0.3)(sims, relevance=relevance)
    assert ran.item() == pytest.approx(losses.build("hn", margin=0.3)(sims).item(), abs=1e-12)


def test_ranp_without_relevant_candidates_compares_negatives_with_one():
    # No positive besides the diagonal: the hard-positive term is [margin_pos + s_neg - 1]+.
    _, _, sims = random_batch(6, seed=4)
    relevance = torch.eye(6, dtype=torch.float64)
    value = losses.build("ranp", margin=0.2, margin_pos=1.5)(sims, relevance=relevance)
    neg = sims.masked_fill(torch.eye(6, dtype=torch.bool), float("-inf"))
    extra = torch.relu(1.5 + neg.amax(1) - 1).mean() + torch.relu(1.5 + neg.amax(0) - 1).mean()
    hn = losses.build("hn", margin=0.2)(sims)
    assert value.item() == pytest.approx(hn.item() + extra.item(), abs=1e-12)
