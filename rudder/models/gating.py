"""Gated embedding units (text side) and collaborative gating (video side) of CE."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rudder.models.masked_batch_norm import grouped_masked_batch_norm, slotwise_masked_batch_norm

_ACTIVATIONS = {"relu": nn.ReLU, "mish": nn.Mish}


class ContextGating(nn.Module):
    """Context gating (Miech et al. 2017): x * sigmoid(BN(W x + b)).

    As ``ContextGating`` in albanie/collaborative-experts ``model/model.py``, which writes
    it as GLU([x, BN(fc(x))]); BN is optional (``use_batchnorm``).
    """

    def __init__(self, dim: int, use_batchnorm: bool):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.bn = nn.BatchNorm1d(dim) if use_batchnorm else None

    def forward(self, x: Tensor) -> Tensor:
        gate = self.fc(x)
        if self.bn is not None:
            gate = self.bn(gate)
        return x * torch.sigmoid(gate)


class GatedEmbeddingUnit(nn.Module):
    """L2(ContextGating(Linear(x))): reference ``GatedEmbeddingUnit`` (one per expert)."""

    def __init__(self, in_dim: int, out_dim: int, use_batchnorm: bool):
        super().__init__()
        self.fc = nn.Linear(in_dim, out_dim)
        self.gating = ContextGating(out_dim, use_batchnorm)

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.gating(self.fc(x)), dim=-1)


class ReasonLayer(nn.Module):
    """One extra layer of g or h: [masked BatchNorm] -> activation -> Linear(D, D).

    The reference builds ``g_reason_shared`` and ``h_reason`` from exactly these layers
    (``BatchNorm1d`` if ``use_bn_reason``, ReLU or Mish, ``Linear``) and calls them once
    per expert pair (g) or expert (h); so each slot of ``x`` (B, *slots, D) gets its own
    batch statistics here (:func:`slotwise_masked_batch_norm`), from the rows where
    ``mask`` (B, *slots) is True (available pairs or experts).
    """

    def __init__(self, dim: int, use_batchnorm: bool, activation: str):
        super().__init__()
        self.bn = nn.BatchNorm1d(dim) if use_batchnorm else None
        self.activation = _ACTIVATIONS[activation]()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        if self.bn is not None:
            x = slotwise_masked_batch_norm(self.bn, x, mask)
        return self.fc(self.activation(x))


class CollaborativeGating(nn.Module):
    """Collaborative gating of E expert embeddings psi (B, E, D) -> (B, E, D).

    Liu et al., BMVC 2019, Sec. 3 "Collaborative gating" (the paper writes
    T_i = h(sum_{j != i} g(psi_i, psi_j))), as implemented by ``CEModule`` with
    ``use_ce="pairwise"`` in albanie/collaborative-experts ``model/model.py``, which
    averages over the available pairs and, with ``include_self=1``, includes j = i:

        T_i    = h( mean_{j in A_b(i)} g([psi_i, psi_j]) )
        out_i  = L2( psi_i * sigmoid( BN_1(T_i) + BN_2(fc_i(psi_i)) ) )

    where A_b(i) are the experts available for video b (i itself included when
    ``include_self``; the reference's pair availability ind_i * ind_j), g's first layer
    is one Linear(2D -> D) shared by all pairs followed by ``g_layers - 1`` ReasonLayers,
    h is ``h_layers`` ReasonLayers (identity when 0), and fc_i, BN_1, BN_2 belong to
    expert i (reference ``ContextGatingReasoning``; ``GatedEmbeddingUnitReasoning`` adds
    the L2 norm). When A_b(i) is empty (only with include_self=False) the mean is 0, as
    the reference's division by (count + 1e-11) gives.

    Deviations: BatchNorm statistics use available rows only (the reference normalises
    over zero-filled missing experts too). Outputs of unavailable experts are set to 0
    (they get zero mixture weight in the similarity).

    Cost: with a linear g (g_layers=1) the pair mean is computed exactly as
    W_a psi_i + b + W_b mean_j psi_j, never materialising the E x E pairs.
    """

    def __init__(
        self,
        num_experts: int,
        dim: int,
        g_layers: int,
        h_layers: int,
        include_self: bool,
        use_batchnorm: bool,
        activation: str,
    ):
        super().__init__()
        self.dim = dim
        self.include_self = include_self
        self.g_first = nn.Linear(2 * dim, dim)
        self.g_rest = nn.ModuleList(
            ReasonLayer(dim, use_batchnorm, activation) for _ in range(g_layers - 1)
        )
        self.h = nn.ModuleList(ReasonLayer(dim, use_batchnorm, activation) for _ in range(h_layers))
        self.gate_fc = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_experts))
        if use_batchnorm:
            self.mask_bn: nn.ModuleList | None = nn.ModuleList(
                nn.BatchNorm1d(dim) for _ in range(num_experts)
            )
            self.gate_bn: nn.ModuleList | None = nn.ModuleList(
                nn.BatchNorm1d(dim) for _ in range(num_experts)
            )
        else:
            self.mask_bn = self.gate_bn = None

    def pair_mask(self, available: Tensor) -> Tensor:
        """(B, E, E) bool: pair (i, j) of video b enters expert i's mean."""
        pairs = available.unsqueeze(2) & available.unsqueeze(1)
        if not self.include_self:
            eye = torch.eye(available.shape[1], dtype=torch.bool, device=available.device)
            pairs = pairs & ~eye
        return pairs

    def mean_messages(self, psi: Tensor, available: Tensor) -> Tensor:
        """mean_{j in A_b(i)} g([psi_i, psi_j]) -> (B, E, D); 0 where A_b(i) is empty."""
        pairs = self.pair_mask(available)
        count = pairs.sum(-1, keepdim=True).to(psi.dtype)
        weight_i, weight_j = self.g_first.weight.split(self.dim, dim=1)
        from_i = F.linear(psi, weight_i, self.g_first.bias)  # (B, E, D)
        from_j = F.linear(psi, weight_j)  # (B, E, D)
        weights = pairs.to(psi.dtype)
        if not self.g_rest:
            summed = count * from_i + torch.einsum("bij,bjd->bid", weights, from_j)
        else:
            messages = from_i.unsqueeze(2) + from_j.unsqueeze(1)  # (B, E, E, D)
            for layer in self.g_rest:
                messages = layer(messages, pairs)
            summed = torch.einsum("bij,bijd->bid", weights, messages)
        return summed / count.clamp_min(1.0)

    def forward(self, psi: Tensor, available: Tensor) -> Tensor:
        """Gate ``psi`` (B, E, D), unit-norm rows, given ``available`` (B, E) bool."""
        mask = self.mean_messages(psi, available)
        for layer in self.h:
            mask = layer(mask, available)
        # expert i's own Linear and BatchNorms, all experts in one pass (same as a loop)
        # gate_fc holds nn.Linear layers (a ModuleList's items are typed nn.Module)
        weight = torch.stack([fc.weight for fc in self.gate_fc])  # type: ignore[misc]  # (E, D, D)
        bias = torch.stack([fc.bias for fc in self.gate_fc])  # type: ignore[misc]  # (E, D)
        t_self = torch.einsum("bei,eoi->beo", psi, weight) + bias
        if self.mask_bn is not None and self.gate_bn is not None:  # both or neither
            # each a ModuleList of nn.BatchNorm1d (typed as a list of nn.Module)
            mask = grouped_masked_batch_norm(self.mask_bn, mask, available)  # type: ignore[arg-type]
            t_self = grouped_masked_batch_norm(
                self.gate_bn, t_self, available  # type: ignore[arg-type]
            )
        out = F.normalize(psi * torch.sigmoid(mask + t_self), dim=-1)
        return out * available.unsqueeze(-1).to(out.dtype)
