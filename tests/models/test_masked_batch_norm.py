"""Masked BatchNorm: BatchNorm of the selected rows, against nn.BatchNorm1d on ``x[mask]``,
and its closed-form backward against autograd's and finite differences."""

import copy

import pytest
import torch

from rudder.models.masked_batch_norm import (
    _MaskedBatchNorm,
    grouped_masked_batch_norm,
    masked_batch_norm,
    slotwise_masked_batch_norm,
)


def test_masked_batch_norm_uses_selected_rows_only():
    torch.manual_seed(2)
    bn, reference = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    x = torch.randn(2, 4, 3)
    mask = torch.tensor([[True, False, True, True], [False, True, False, False]])
    out = masked_batch_norm(bn, x, mask)
    assert torch.allclose(out[mask], reference(x[mask]), atol=1e-6)
    assert torch.equal(out[~mask], torch.zeros(4, 3))
    assert torch.allclose(bn.running_mean, reference.running_mean)
    assert torch.allclose(bn.running_var, reference.running_var)


def test_masked_batch_norm_with_fewer_than_two_rows_uses_running_stats():
    bn = torch.nn.BatchNorm1d(2).train()
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([1.0, -1.0]))
        bn.running_var.copy_(torch.tensor([4.0, 1.0]))
    x = torch.tensor([[3.0, 0.0], [7.0, 7.0]])
    out = masked_batch_norm(bn, x, torch.tensor([True, False]))
    # (3 - 1) / sqrt(4 + eps) = 1, (0 + 1) / sqrt(1 + eps) = 1; the other row is 0
    assert torch.allclose(out, torch.tensor([[1.0, 1.0], [0.0, 0.0]]), atol=1e-4)
    empty = masked_batch_norm(bn, x, torch.tensor([False, False]))
    assert torch.equal(empty, torch.zeros(2, 2))
    empty.sum().backward()  # parameters stay in the graph (DDP needs every one used)
    assert bn.weight.grad is not None and bn.bias.grad is not None


def test_masked_batch_norm_ignores_nan_in_masked_rows_and_keeps_dtype():
    bn, reference = torch.nn.BatchNorm1d(2), torch.nn.BatchNorm1d(2)
    x = torch.tensor([[1.0, 2.0], [float("nan"), 0.0], [3.0, -2.0], [0.0, 1.0]])
    mask = torch.tensor([True, False, True, True])
    out = masked_batch_norm(bn, x, mask)
    assert torch.allclose(out[mask], reference(x[mask]), atol=1e-6)
    assert torch.equal(out[1], torch.zeros(2))
    assert torch.allclose(bn.running_var, reference.running_var)
    assert bn.num_batches_tracked == 1
    half = masked_batch_norm(bn.eval(), x.to(torch.bfloat16), mask)
    assert half.dtype == torch.bfloat16


@pytest.mark.parametrize("affine", [True, False])
def test_gradients_equal_batch_norm_of_the_selected_rows(affine):
    torch.manual_seed(3)
    bn, reference = torch.nn.BatchNorm1d(3, affine=affine), torch.nn.BatchNorm1d(3, affine=affine)
    if affine:
        with torch.no_grad():
            for module in (bn, reference):
                module.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
                module.bias.copy_(torch.tensor([0.1, 0.0, 0.3]))
    x = torch.randn(3, 5, 3, requires_grad=True)
    mask = torch.rand(3, 5) < 0.6
    upstream = torch.randn(3, 5, 3)
    (masked_batch_norm(bn, x, mask) * upstream).sum().backward()
    picked = x.detach()[mask].requires_grad_()
    (reference(picked) * upstream[mask]).sum().backward()
    assert torch.allclose(x.grad[mask], picked.grad, atol=1e-5)
    assert torch.equal(x.grad[~mask], torch.zeros_like(x.grad[~mask]))
    if affine:
        assert torch.allclose(bn.weight.grad, reference.weight.grad, atol=1e-5)
        assert torch.allclose(bn.bias.grad, reference.bias.grad, atol=1e-5)


@pytest.mark.parametrize("case", ["batch", "running", "no-affine", "no-running-stats"])
def test_the_closed_form_backward_matches_finite_differences(case):
    torch.manual_seed(4)
    values = torch.randn(4, 3, 2, dtype=torch.float64)
    keep = (torch.rand(4, 3, 1) < 0.7) if case != "running" else torch.zeros(4, 3, 1, dtype=bool)
    if case == "running":
        keep[0, 0] = True  # one row: the running statistics normalise
    values.requires_grad_()
    gamma = torch.randn(2, dtype=torch.float64, requires_grad=True)
    beta = torch.randn(2, dtype=torch.float64, requires_grad=True)
    running = (torch.tensor([0.5, -1.0], dtype=torch.float64),
               torch.tensor([2.0, 0.5], dtype=torch.float64))
    if case == "no-affine":
        gamma = beta = None
    if case == "no-running-stats":
        running = (None, None)

    def out(values, gamma, beta):  # as masked_batch_norm uses it: rows outside keep are 0
        values = torch.where(keep, values, 0.0)
        normed = _MaskedBatchNorm.apply(values, keep, gamma, beta, *running, 1e-5, (0, 1))[0]
        return torch.where(keep, normed, 0.0)

    inputs = (values, gamma, beta)
    assert torch.autograd.gradcheck(out, inputs)


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_a_group_equals_one_masked_batch_norm_per_group(momentum, affine, training):
    torch.manual_seed(5)

    def group():
        return torch.nn.ModuleList(torch.nn.BatchNorm1d(3, momentum=momentum, affine=affine)
                                   for _ in range(4))

    grouped, looped = group(), group()
    with torch.no_grad():
        for a, b in zip(grouped, looped, strict=True):
            a.running_mean.normal_(), a.running_var.uniform_(0.5, 2.0)
            if affine:
                torch.nn.init.normal_(a.weight), torch.nn.init.normal_(a.bias)
            b.load_state_dict(a.state_dict())
    grouped.train(training), looped.train(training)
    x = torch.randn(6, 4, 3)
    mask = torch.rand(6, 4) < 0.7
    mask[:, 2] = False
    mask[:, 3] = torch.tensor([True, False, False, False, False, False])  # one row: running stats
    x_group, x_loop = x.clone().requires_grad_(), x.clone().requires_grad_()
    upstream = torch.randn(6, 4, 3)
    for _ in range(2):  # twice: the running statistics feed the second pass
        out_group = grouped_masked_batch_norm(grouped, x_group, mask)
        out_loop = torch.stack([masked_batch_norm(bn, x_loop[:, e], mask[:, e])
                                for e, bn in enumerate(looped)], dim=1)
        assert torch.allclose(out_group, out_loop, atol=1e-6)
    (out_group * upstream).sum().backward()
    (out_loop * upstream).sum().backward()
    assert torch.allclose(x_group.grad, x_loop.grad, atol=1e-6)
    for a, b in zip(grouped, looped, strict=True):
        for key, value in a.state_dict().items():
            assert torch.allclose(value.float(), b.state_dict()[key].float(), atol=1e-6), key
        if affine:
            assert torch.allclose(a.weight.grad, b.weight.grad, atol=1e-6)
            assert torch.allclose(a.bias.grad, b.bias.grad, atol=1e-6)


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_slotwise_equals_one_masked_batch_norm_per_slot_in_order(momentum, affine, training):
    # CE's gating calls one BatchNorm per expert pair, in order: the running averages after
    # the sequential calls are what the closed form must leave
    torch.manual_seed(6)
    slotwise = torch.nn.BatchNorm1d(3, momentum=momentum, affine=affine)
    with torch.no_grad():
        slotwise.running_mean.normal_(), slotwise.running_var.uniform_(0.5, 2.0)
        slotwise.num_batches_tracked.fill_(4)
        if affine:
            torch.nn.init.normal_(slotwise.weight), torch.nn.init.normal_(slotwise.bias)
    looped = copy.deepcopy(slotwise)
    slotwise.train(training), looped.train(training)
    x = torch.randn(6, 3, 2, 3)
    mask = torch.rand(6, 3, 2) < 0.7
    mask[:, 1, 0] = False  # no rows: no update
    x_slot, x_loop = x.clone().requires_grad_(), x.clone().requires_grad_()
    upstream = torch.randn(6, 3, 2, 3)
    for _ in range(2):
        out_slot = slotwise_masked_batch_norm(slotwise, x_slot, mask)
        out_loop = torch.stack([
            torch.stack([masked_batch_norm(looped, x_loop[:, i, j], mask[:, i, j])
                         for j in range(2)], dim=1) for i in range(3)], dim=1)
        assert torch.allclose(out_slot, out_loop, atol=1e-6)
    (out_slot * upstream).sum().backward()
    (out_loop * upstream).sum().backward()
    assert torch.allclose(x_slot.grad, x_loop.grad, atol=1e-6)
    for key, value in slotwise.state_dict().items():
        assert torch.allclose(value.float(), looped.state_dict()[key].float(), atol=1e-6), key
    if affine:
        assert torch.allclose(slotwise.weight.grad, looped.weight.grad, atol=1e-5)
        assert torch.allclose(slotwise.bias.grad, looped.bias.grad, atol=1e-5)
