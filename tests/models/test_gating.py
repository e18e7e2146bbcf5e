"""Gated embedding units and collaborative gating: hand-worked cases and a loop reference."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from rudder.models.gating import CollaborativeGating, GatedEmbeddingUnit


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def _identity_gating(include_self):
    """D = 2, g([a, b]) = a + b, no BatchNorm, fc_i = 0: out_i = L2(psi_i * sigmoid(mask_i))."""
    gating = CollaborativeGating(3, 2, 1, 0, include_self, use_batchnorm=False, activation="relu")
    with torch.no_grad():
        gating.g_first.weight.copy_(torch.cat([torch.eye(2), torch.eye(2)], dim=1))
        gating.g_first.bias.zero_()
        for fc in gating.gate_fc:
            fc.weight.zero_()
            fc.bias.zero_()
    return gating


PSI = torch.tensor([[[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]]])  # expert 1 is unavailable
AVAILABLE = torch.tensor([[True, False, True]])


@pytest.mark.parametrize(
    "include_self, mask_0",
    [
        # mean over j in {0, 2} of psi_0 + psi_j = (0.6, 0.8) + (0.3, 0.9) = (0.9, 1.7);
        # counting the unavailable expert 1 would give (0.6, 0.8) + (0.533, 0.6) instead.
        (True, (0.9, 1.7)),
        # j in {2} only: (0.6, 0.8) + (0, 1) = (0.6, 1.8)
        (False, (0.6, 1.8)),
    ],
)
def test_mask_is_mean_over_available_experts(include_self, mask_0):
    gating = _identity_gating(include_self)
    out = gating(PSI, AVAILABLE)
    gated = torch.tensor([0.6 * _sigmoid(mask_0[0]), 0.8 * _sigmoid(mask_0[1])])
    assert torch.allclose(out[0, 0], gated / gated.norm(), atol=1e-6)
    assert torch.equal(out[0, 1], torch.zeros(2))  # unavailable rows are zero


def test_single_available_expert_without_self_gets_zero_mask():
    gating = _identity_gating(include_self=False)
    available = torch.tensor([[False, False, True]])
    out = gating(PSI, available)
    # no partner: mask 0, sigmoid(0) = 1/2 on both coordinates -> psi_2 itself
    assert torch.isfinite(out).all()
    assert torch.allclose(out[0, 2], PSI[0, 2])


def _loop_reference(gating, psi, available):
    """Per video, per expert, per partner; eval-mode BatchNorm is an affine map per row."""

    def bn(module, v):
        return (v - module.running_mean) / torch.sqrt(module.running_var + module.eps) * (
            module.weight
        ) + module.bias

    def reason(layer, v):
        return layer.fc(layer.activation(bn(layer.bn, v)))

    batch, experts, _ = psi.shape
    out = torch.zeros_like(psi)
    for b in range(batch):
        for i in range(experts):
            if not available[b, i]:
                continue
            messages = []
            for j in range(experts):
                if available[b, j] and (gating.include_self or j != i):
                    message = gating.g_first(torch.cat([psi[b, i], psi[b, j]]))
                    for layer in gating.g_rest:
                        message = reason(layer, message)
                    messages.append(message)
            mask = torch.stack(messages).mean(0) if messages else torch.zeros(psi.shape[-1])
            for layer in gating.h:
                mask = reason(layer, mask)
            t = bn(gating.mask_bn[i], mask) + bn(gating.gate_bn[i], gating.gate_fc[i](psi[b, i]))
            out[b, i] = F.normalize(psi[b, i] * torch.sigmoid(t), dim=0)
    return out


@pytest.mark.parametrize("g_layers, h_layers, include_self", [(1, 0, True), (3, 1, False)])
def test_matches_loop_reference(g_layers, h_layers, include_self):
    torch.manual_seed(3)
    gating = CollaborativeGating(4, 5, g_layers, h_layers, include_self, True, "mish").eval()
    for module in gating.modules():  # non-trivial running statistics and affine terms
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.normal_()
            module.running_var.uniform_(0.5, 2.0)
            torch.nn.init.normal_(module.weight)
            torch.nn.init.normal_(module.bias)
    psi = F.normalize(torch.randn(6, 4, 5), dim=-1)
    available = torch.rand(6, 4) < 0.6
    available[:, 0] = True
    available[1] = torch.tensor([False, False, True, False])
    with torch.no_grad():
        assert torch.allclose(
            gating(psi, available), _loop_reference(gating, psi, available), atol=1e-5
        )


def _training_loop_reference(gating, psi):
    """The reference's training forward with every expert available: g_reason_shared once
    per pair (i, j), i-major, h_reason once per expert, each a plain BatchNorm1d call."""
    out = []
    for i in range(psi.shape[1]):
        messages = []
        for j in range(psi.shape[1]):
            if gating.include_self or j != i:
                message = gating.g_first(torch.cat([psi[:, i], psi[:, j]], dim=1))
                for layer in gating.g_rest:
                    message = layer.fc(layer.activation(layer.bn(message)))
                messages.append(message)
        mask = torch.stack(messages).mean(0)
        for layer in gating.h:
            mask = layer.fc(layer.activation(layer.bn(mask)))
        t = gating.mask_bn[i](mask) + gating.gate_bn[i](gating.gate_fc[i](psi[:, i]))
        out.append(F.normalize(psi[:, i] * torch.sigmoid(t), dim=-1))
    return torch.stack(out, dim=1)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_training_statistics_are_per_pair_and_per_expert_as_the_reference(momentum):
    # CEModule calls the shared g network once per expert pair and h once per expert, so
    # each has its own batch statistics and the running averages move once per call
    torch.manual_seed(7)
    gating = CollaborativeGating(4, 5, 3, 1, True, True, "mish").train()
    for module in gating.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.momentum = momentum
    reference = copy.deepcopy(gating)
    psi = F.normalize(torch.randn(8, 4, 5), dim=-1)
    available = torch.ones(8, 4, dtype=torch.bool)
    assert torch.allclose(gating(psi, available), _training_loop_reference(reference, psi),
                          atol=1e-5)
    for ours, theirs in zip(gating.modules(), reference.modules(), strict=False):
        if isinstance(ours, torch.nn.BatchNorm1d):
            for key, value in ours.state_dict().items():
                assert torch.allclose(value.float(), theirs.state_dict()[key].float(),
                                      atol=1e-5), key


@pytest.mark.parametrize("g_layers", [1, 2])
def test_unavailable_experts_do_not_affect_outputs_in_training_mode(g_layers):
    torch.manual_seed(4)
    gating = CollaborativeGating(3, 4, g_layers, 1, True, True, "relu").train()
    psi = F.normalize(torch.randn(5, 3, 4), dim=-1)
    available = torch.tensor(
        [[1, 1, 0], [1, 0, 1], [1, 1, 1], [0, 1, 1], [1, 0, 0]], dtype=torch.bool
    )
    base = gating(psi, available)
    changed = torch.where(available.unsqueeze(-1), psi, torch.randn(5, 3, 4) * 5)
    again = gating(changed, available)
    assert torch.allclose(again, base, atol=1e-6)
    norms = base.norm(dim=-1)
    assert torch.allclose(norms, available.float(), atol=1e-6)


def test_gated_embedding_unit_formula():
    torch.manual_seed(5)
    unit = GatedEmbeddingUnit(3, 4, use_batchnorm=False)
    x = torch.randn(2, 3)
    hidden = unit.fc(x)
    expected = F.normalize(hidden * torch.sigmoid(unit.gating.fc(hidden)), dim=-1)
    assert torch.allclose(unit(x), expected, atol=1e-6)
    assert torch.allclose(unit(x).norm(dim=-1), torch.ones(2), atol=1e-6)
