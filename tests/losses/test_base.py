"""The call contract shared by every loss: input errors, ignored inputs, finite gradients."""

import pytest
import torch

from rudder import losses
from rudder.losses._base import anchor_view, mean_off_diagonal

from .conftest import random_batch

PARAMS = {"dw": {"dim": 16}, "hn_exclusion": {"threshold": 0.5}}


def _inputs(size=6, seed=0):
    _, _, sims = random_batch(size, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    relevance = torch.rand(size, size, generator=gen, dtype=torch.float64).pow(3)
    relevance.fill_diagonal_(1.0)
    labels = torch.randint(0, 4, (size, size), generator=gen)
    labels.fill_diagonal_(2)
    text_sims = torch.rand(size, size, generator=gen, dtype=torch.float64)
    return sims, {"relevance": relevance, "labels": labels, "text_sims": text_sims}


def _call(name, sims, side, seed=0):
    return losses.build(name, **PARAMS.get(name, {}))(
        sims, generator=torch.Generator().manual_seed(seed), **side
    )


def test_anchor_view_follows_the_rule():
    matrix = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    view = anchor_view(matrix)
    assert view[0, 0, 1] == matrix[0, 1]  # caption anchor 0, video candidate 1
    assert view[1, 0, 1] == matrix[1, 0]  # video anchor 0, caption candidate 1
    # off-diagonal mean: (2 + 3 + 3 + 2) / (2 * 2 * 1)
    assert mean_off_diagonal(view).item() == pytest.approx(2.5)


@pytest.mark.parametrize("name", losses.names())
def test_value_is_a_finite_scalar_in_float32(name):
    sims, side = _inputs()
    value = _call(name, sims.float(), {k: v.float() if v.is_floating_point() else v
                                       for k, v in side.items()})
    assert value.dim() == 0 and value.dtype == torch.float32 and torch.isfinite(value)
    assert value.item() >= 0


@pytest.mark.parametrize("name", losses.names())
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradients_are_finite(name, seed):
    sims, side = _inputs(size=8, seed=seed)
    sims = sims.clone().requires_grad_(True)
    _call(name, sims, side, seed).backward()
    assert torch.isfinite(sims.grad).all()
    assert sims.grad.abs().sum() > 0  # the random batches violate some margin


@pytest.mark.parametrize("name", [n for n in losses.names() if n != "ot"])
def test_gradcheck(name):
    # ot is left out: its transport plan is deliberately detached (test_optimal_transport.py).
    sims, side = _inputs(size=5, seed=3)
    sims = sims.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s: _call(name, s, side), (sims,))


def test_gradients_finite_at_the_edges():
    # similarities exactly 1 (d = 0 for dw) and exact ties among the hardest negatives
    sims = torch.tensor([[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]],
                        requires_grad=True)
    _, side = _inputs(size=3)
    side = {k: v.float() if v.is_floating_point() else v for k, v in side.items()}
    for name in losses.names():
        sims.grad = None
        _call(name, sims, side).backward()
        assert torch.isfinite(sims.grad).all(), name


def test_unused_inputs_are_ignored():
    sims, side = _inputs()
    assert losses.build("mm")(sims, **side).item() == losses.build("mm")(sims).item()


@pytest.mark.parametrize("name, missing", [
    ("ranp", "relevance"), ("ran", "relevance"), ("sms", "relevance"),
    ("relevance_margin", "relevance"), ("mimm_adaptive", "relevance"),
    ("po", "labels"), ("hn_exclusion", "text_sims"),
    ("triplet", "generator"), ("dw", "generator"),
])
def test_missing_required_input(name, missing):
    sims, side = _inputs()
    side = {k: v for k, v in side.items() if k != missing}
    loss = losses.build(name, **PARAMS.get(name, {}))
    with pytest.raises(losses.LossInputError, match=f"loss '{name}' needs `{missing}`"):
        loss(sims, **side)


@pytest.mark.parametrize("sims, message", [
    (torch.zeros(3, 4), r"square B x B matrix .* got shape \(3, 4\)"),
    (torch.zeros(3), r"got shape \(3,\)"),
    (torch.zeros(1, 1), "at least 2 pairs"),
    (torch.zeros(3, 3, dtype=torch.long), "floating-point"),
    (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), r"NaN or infinite values at \(0, 1\)"),
    ([[1.0, 0.0], [0.0, 1.0]], "must be a torch.Tensor"),
])
def test_bad_sims(sims, message):
    with pytest.raises(losses.LossInputError, match=message):
        losses.build("mm")(sims)


def test_bad_relevance():
    sims, _ = _inputs(size=3)
    loss = losses.build("ran")
    with pytest.raises(losses.LossInputError, match=r"`relevance` has shape \(2, 2\)"):
        loss(sims, relevance=torch.zeros(2, 2))
    with pytest.raises(losses.LossInputError, match=r"\[0, 1\]; relevance\[1, 2\] = 1.5"):
        bad = torch.zeros(3, 3)
        bad[1, 2] = 1.5
        loss(sims, relevance=bad)
    with pytest.raises(losses.LossInputError, match=r"relevance\[0, 0\] = nan"):
        loss(sims, relevance=torch.full((3, 3), float("nan")))
    with pytest.raises(losses.LossInputError, match="must be a torch.Tensor"):
        loss(sims, relevance=[[0.0] * 3] * 3)


def test_bad_labels():
    sims, _ = _inputs(size=3)
    loss = losses.build("po")
    labels = torch.full((3, 3), 2)
    labels[2, 0] = -1
    with pytest.raises(losses.LossInputError, match=r"\{0, 1, 2, 3\}; labels\[2, 0\] = -1"):
        loss(sims, labels=labels)
    labels[2, 0] = 4
    with pytest.raises(losses.LossInputError, match=r"labels\[2, 0\] = 4"):
        loss(sims, labels=labels)
    with pytest.raises(losses.LossInputError, match="integer tensor"):
        loss(sims, labels=torch.zeros(3, 3))
    with pytest.raises(losses.LossInputError, match=r"`labels` has shape \(3, 2\)"):
        loss(sims, labels=torch.zeros(3, 2, dtype=torch.long))
    # ot reads (and checks) labels only with positive_labels; the baseline ignores them
    with pytest.raises(losses.LossInputError, match="loss 'ot'"):
        losses.build("ot", positive_labels=True)(sims, labels=torch.full((3, 3), 5))
    losses.build("ot")(sims, labels=torch.full((3, 3), 5))


def test_bad_text_sims_and_generator():
    sims, _ = _inputs(size=3)
    with pytest.raises(losses.LossInputError, match="`text_sims` contains NaN"):
        losses.build("hn_exclusion")(sims, text_sims=torch.full((3, 3), float("inf")))
    with pytest.raises(losses.LossInputError, match="`generator` must be a torch.Generator"):
        losses.build("triplet")(sims, generator=0)
