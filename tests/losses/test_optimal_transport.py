"""ot: ground metric, one Sinkhorn step by hand, equality with POT's sinkhorn."""

import math
import warnings

import numpy as np
import pytest
import torch

from rudder import losses
from rudder.losses.optimal_transport import ground_metric

from .conftest import random_batch


def _close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype),
                               rtol=0, atol=1e-12)


def test_ground_metric_hand_worked(s2):
    # d² = 2 - 2s = [[0.4, 0.6], [1.4, 0.8]]; diagonal positive -> d²; off-diagonal negative
    # -> [1 - d²]+ = [1 - 0.6]+ = 0.4 and [1 - 1.4]+ = 0.
    _close(ground_metric(s2, margin=1.0), [[0.4, 0.4], [0.0, 0.8]])
    # label 2 on (c1, v0) makes it a positive: GM = d² = 1.4; labels 1 and 3 stay negative.
    labels = torch.tensor([[2, 1], [2, 2]])
    _close(ground_metric(s2, 1.0, labels), [[0.4, 0.4], [1.4, 0.8]])
    labels = torch.tensor([[2, 3], [1, 2]])
    _close(ground_metric(s2, 1.0, labels), [[0.4, 0.4], [0.0, 0.8]])


def test_one_sinkhorn_iteration_hand_worked(s2):
    # GM = [[0.4, 0.4], [0, 0.8]]; exp(-10 GM) = [[e^-4, e^-4], [1, e^-8]];
    # K = exp(-5 exp(-10 GM)) = [[0.912490, 0.912490], [0.006738, 0.998324]].
    # u = [1/2, 1/2]; Kᵀu = [0.459614, 0.955407]; v = 0.5 / Kᵀu = [1.087869, 0.523337];
    # K v = [1.470210, 0.529790]; u = 0.5 / K v = [0.340087, 0.943770];
    # T = u_i K_ij v_j = [[0.337595, 0.162405], [0.006918, 0.493082]];
    # loss = 0.4 * 0.337595 + 0.4 * 0.162405 + 0 * 0.006918 + 0.8 * 0.493082 = 0.594466
    loss = losses.build("ot", iterations=1)
    k00, k10, k11 = math.exp(-5 * math.exp(-4)), math.exp(-5), math.exp(-5 * math.exp(-8))
    v = [0.5 / (0.5 * (k00 + k10)), 0.5 / (0.5 * (k00 + k11))]
    u = [0.5 / (k00 * (v[0] + v[1])), 0.5 / (k10 * v[0] + k11 * v[1])]
    plan = [[u[0] * k00 * v[0], u[0] * k00 * v[1]], [u[1] * k10 * v[0], u[1] * k11 * v[1]]]
    _close(loss.transport_plan(s2), plan)
    assert plan[0][0] == pytest.approx(0.337595, abs=1e-6)
    assert plan[1][1] == pytest.approx(0.493082, abs=1e-6)
    expected = 0.4 * plan[0][0] + 0.4 * plan[0][1] + 0.8 * plan[1][1]
    assert loss(s2).item() == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.594466, abs=1e-6)


@pytest.mark.parametrize("iterations, lam, with_labels", [(20, 5.0, False), (7, 2.0, True)])
def test_plan_equals_pot(iterations, lam, with_labels):
    ot = pytest.importorskip("ot")
    _, _, sims = random_batch(7, seed=iterations)
    labels = None
    if with_labels:
        labels = torch.randint(0, 4, (7, 7), generator=torch.Generator().manual_seed(1))
        labels.fill_diagonal_(2)
    loss = losses.build("ot", lam=lam, iterations=iterations, positive_labels=with_labels)
    gm = ground_metric(sims, 1.0, labels).numpy()
    a = b = np.full(7, 1 / 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns that stopThr=0 never converges
        expected = ot.sinkhorn(a, b, np.exp(-10 * gm), reg=1 / lam, numItermax=iterations,
                               stopThr=0)
    plan = loss.transport_plan(sims, labels).numpy()
    assert np.allclose(plan, expected, rtol=1e-10, atol=1e-14)
    assert loss(sims, labels=labels).item() == pytest.approx(float((expected * gm).sum()),
                                                             rel=1e-10)


def test_plan_is_constant_in_the_gradient(s2):
    # d loss / d s = Σ T ⊙ dGM/ds with T held fixed: dGM/ds = -2 on positives, +2 on
    # negatives inside the margin (GM = 1 - (2 - 2s)), 0 on negatives past it.
    loss = losses.build("ot", iterations=1)
    plan = loss.transport_plan(s2)
    sims = s2.clone().requires_grad_(True)
    loss(sims).backward()
    expected = torch.tensor([[-2.0, 2.0], [0.0, -2.0]], dtype=torch.float64) * plan
    assert torch.allclose(sims.grad, expected)


def test_labels_are_positives_only_when_asked(s2):
    labels = torch.tensor([[2, 0], [2, 2]])  # (c1, v0) labelled positive
    baseline = losses.build("ot")
    assert baseline.requires == ()  # the paper's OT baseline never reads labels
    assert baseline(s2, labels=labels).item() == baseline(s2).item()
    with_labels = losses.build("ot", positive_labels=True)
    assert with_labels(s2, labels=labels).item() != baseline(s2).item()
    with pytest.raises(losses.LossInputError, match="needs `labels`"):
        with_labels(s2)


def test_plan_weights_the_larger_ground_metric_more(s2):
    # reg = +1/lam: in row c0 both entries have GM 0.4 (equal mass); the reference's
    # reg = -1/lam would instead favour the pair with the smaller GM. Row c1: GM (0, 0.8)
    # -> most of the row's mass on the hard positive (0.8).
    plan = losses.build("ot").transport_plan(s2)
    assert plan[1, 1] > 10 * plan[1, 0]
