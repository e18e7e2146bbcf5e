"""po: hand-worked value with every label kind, the mm identity, margin order."""

import pytest
import torch

from rudder import losses

from .conftest import random_batch

# labels[i, j]: caption i as query, the caption of video j as candidate (asymmetric on purpose).
LABELS = [[2, 1, 0], [0, 2, 2], [3, 0, 2]]


def test_po_hand_worked(s3):
    # x = dc - dp = s_aa - s_ab; p = 0.02, m1 = 0.05, m2 = 0.15, n = 0.2.
    # Caption anchor a, video b: label L[a, b]. Video anchor a, caption b: label L[b, a].
    # caption c0: v1 x = 0.9-0.5 = 0.4, L=1: [0.05-0.4]+ + [0.4-0.15]+ = 0.25
    #             v2 x = 0.7, L=0: [0.2-0.7]+ = 0
    # caption c1: v0 x = 0.1, L=0: [0.2-0.1]+ = 0.1
    #             v2 x = 0.6, L=2: [0.6-0.02]+ = 0.58
    # caption c2: v0 x = 0.1, L=3 (partial): [0.05-0.1]+ + [0.1-0.15]+ = 0
    #             v1 x = -0.4, L=0: [0.2+0.4]+ = 0.6
    # video v0:   c1 x = 0.9-0.6 = 0.3, L[1,0]=0: [0.2-0.3]+ = 0
    #             c2 x = 0.6, L[2,0]=3 (partial): 0 + [0.6-0.15]+ = 0.45
    # video v1:   c0 x = 0.2, L[0,1]=1: 0 + [0.2-0.15]+ = 0.05
    #             c2 x = -0.1, L[2,1]=0: [0.2+0.1]+ = 0.3
    # video v2:   c0 x = 0.2, L[0,2]=0: [0.2-0.2]+ = 0
    #             c1 x = 0.3, L[1,2]=2: [0.3-0.02]+ = 0.28
    # total 2.61 / 12 = 0.2175
    # (Reading labels[a, b] for the video anchors too, the video terms would be
    # 0.15, 0, 0, 0, 0.05, 0 and the total 1.73 / 12: the labels are asymmetric, so this
    # value pins the anchor/candidate rule.)
    labels = torch.tensor(LABELS)
    assert losses.build("po")(s3, labels=labels).item() == pytest.approx(2.61 / 12, abs=1e-12)


def test_po_description_as_negative(s3):
    # Label 3 becomes a negative: caption c2 -> v0 (x = 0.1) gives [0.2-0.1]+ = 0.1 instead of 0,
    # video v0 -> c2 (x = 0.6) gives [0.2-0.6]+ = 0 instead of 0.45: (2.61 + 0.1 - 0.45) / 12
    labels = torch.tensor(LABELS)
    loss = losses.build("po", description_as_partial=False)
    assert loss(s3, labels=labels).item() == pytest.approx(2.26 / 12, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_po_all_negative_equals_mm_with_margin_n(seed):
    _, _, sims = random_batch(9, seed=seed)
    labels = torch.zeros(9, 9, dtype=torch.int8)
    labels.fill_diagonal_(2)
    po = losses.build("po", n=0.3, m2=0.2)
    mm = losses.build("mm", margin=0.3)
    assert po(sims, labels=labels).item() == pytest.approx(mm(sims).item(), abs=1e-12)


def test_po_ignores_the_diagonal_label(s3):
    labels = torch.tensor(LABELS)
    other = labels.clone()
    other.fill_diagonal_(0)
    loss = losses.build("po")
    assert loss(s3, labels=labels).item() == loss(s3, labels=other).item()


@pytest.mark.parametrize(
    "margins",
    [{"p": 0.05, "m1": 0.05}, {"m1": 0.2, "m2": 0.15}, {"m2": 0.25}, {"p": 0.3}],
)
def test_po_rejects_unordered_margins(margins):
    with pytest.raises(losses.LossConfigError, match="p < m1 < m2 < n"):
        losses.build("po", **margins)
