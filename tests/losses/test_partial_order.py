"""po: hand-worked value with every label kind, the mm identity, margin order."""

import pytest
import torch

from rudder import losses

from .conftest import random_batch

# labels[i, j]: caption i as query, the caption of video j as candidate (asymmetric on purpose).
LABELS = [[2, 1, 0], [0, 2, 2], [3, 0, 2]]


def test_po_hand_worked(s3):
    # x = dc - dp = s_aa - s_ab; p = 0.02, m1 = 0.05, m2 = 0.15, n = 0.2.
    # One label per pair (i, j), L[i, j], for the caption anchor i (video j) and for the
    # video anchor i (caption j): the RUDDER paper's Eq. 1.
    # caption c0: v1 x = 0.9-0.5 = 0.4, L=1: [0.05-0.4]+ + [0.4-0.15]+ = 0.25
    #             v2 x = 0.7, L=0: [0.2-0.7]+ = 0
    # caption c1: v0 x = 0.1, L=0: [0.2-0.1]+ = 0.1
    #             v2 x = 0.6, L=2: [0.6-0.02]+ = 0.58
    # caption c2: v0 x = 0.1, L=3 (partial): [0.05-0.1]+ + [0.1-0.15]+ = 0
    #             v1 x = -0.4, L=0: [0.2+0.4]+ = 0.6
    # video v0:   c1 x = 0.9-0.6 = 0.3, L[0,1]=1: 0 + [0.3-0.15]+ = 0.15
    #             c2 x = 0.6, L[0,2]=0: [0.2-0.6]+ = 0
    # video v1:   c0 x = 0.7-0.5 = 0.2, L[1,0]=0: [0.2-0.2]+ = 0
    #             c2 x = -0.1, L[1,2]=2: [-0.1-0.02]+ = 0
    # video v2:   c0 x = 0.4-0.2 = 0.2, L[2,0]=3 (partial): 0 + [0.2-0.15]+ = 0.05
    #             c1 x = 0.3, L[2,1]=0: [0.2-0.3]+ = 0
    # total 1.73 / 12
    # (Reading labels[b, a] for the video anchors, the old rule, the video terms would be
    # 0, 0.45, 0.05, 0.3, 0, 0.28 and the total 2.61 / 12: the labels are asymmetric, so
    # this value pins the paper's rule.)
    labels = torch.tensor(LABELS)
    assert losses.build("po")(s3, labels=labels).item() == pytest.approx(1.73 / 12, abs=1e-12)


def test_po_description_as_negative(s3):
    # Label 3 becomes a negative: caption c2 -> v0 (x = 0.1) gives [0.2-0.1]+ = 0.1 instead of 0,
    # video v2 -> c0 (x = 0.2) gives [0.2-0.2]+ = 0 instead of 0.05: (1.73 + 0.1 - 0.05) / 12
    labels = torch.tensor(LABELS)
    loss = losses.build("po", description_as_partial=False)
    assert loss(s3, labels=labels).item() == pytest.approx(1.78 / 12, abs=1e-12)


def paper_po(sims, labels, p=0.02, m1=0.05, m2=0.15, n=0.2, description_as_partial=True):
    """The RUDDER paper's Eq. 1 as a direct loop: one label per pair (i, j) for both terms."""
    size = len(sims)
    d = [[1 - float(sims[i][j]) for j in range(size)] for i in range(size)]
    total = 0.0
    for i in range(size):
        for j in range(size):
            if i == j:
                continue
            label = int(labels[i][j])
            if label == 3:
                label = 1 if description_as_partial else 0
            for dc in (d[i][j], d[j][i]):  # d(t_i, v_j) and d(v_i, t_j), both against d_ii
                if label == 2:
                    total += max(0.0, dc - d[i][i] - p)
                elif label == 1:
                    total += max(0.0, m1 + d[i][i] - dc) + max(0.0, dc - d[i][i] - m2)
                else:
                    total += max(0.0, n + d[i][i] - dc)
    return total / (2 * size * (size - 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("description_as_partial", [True, False])
def test_po_matches_a_loop_over_the_paper_with_asymmetric_labels(seed, description_as_partial):
    _, _, sims = random_batch(7, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (7, 7), generator=gen)
    assert not torch.equal(labels, labels.T)
    loss = losses.build("po", description_as_partial=description_as_partial)
    expected = paper_po(sims.tolist(), labels.tolist(),
                        description_as_partial=description_as_partial)
    assert loss(sims, labels=labels).item() == pytest.approx(expected, abs=1e-12)


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


@pytest.mark.parametrize("seed", [0, 1])
def test_po_sum_reduction_is_the_papers_sum_over_quadruplets(seed):
    # Eq. 1 sums its hinge terms; reduction="sum" is that total, "mean" divides it by 2B(B-1).
    _, _, sims = random_batch(6, seed=seed)
    labels = torch.randint(0, 4, (6, 6), generator=torch.Generator().manual_seed(seed))
    total = paper_po(sims.tolist(), labels.tolist()) * (2 * 6 * 5)
    summed = losses.build("po", reduction="sum")(sims, labels=labels).item()
    assert summed == pytest.approx(total, abs=1e-10)
    assert losses.build("po")(sims, labels=labels).item() == pytest.approx(total / 60, abs=1e-12)
    with pytest.raises(losses.LossConfigError, match="reduction"):
        losses.build("po", reduction="total")
