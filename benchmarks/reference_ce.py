"""A re-implementation of Collaborative Experts' training step, as the reference code runs it.

The baseline of ``bench_step.py``: the structure and per-step work of ``CENet`` in
albanie/collaborative-experts (``model/model.py``, ``model/net_vlad.py``, ``model/loss.py``)
in its MSR-VTT configuration, written here from that code's description so that rudder's
step can be timed against it at the same shapes:
- text: word features (B, L, 300) -> NetVLAD (BatchNorm over *all* words, padding included,
  as the reference ignores its mask) -> one GatedEmbeddingUnit per expert (Linear, context
  gating with BatchNorm, L2); mixture weights ``moe_fc`` on the pooled text;
- video: per expert ``ReduceDim`` (Linear, L2), the variable-length audio expert pooled by
  NetVLAD first; a missing expert's input is zero-filled before both (CE's ``drop_nans``), so
  it still enters the BatchNorm statistics;
- ``CEModule`` pairwise: for every expert i and every expert j the shared g network runs on
  [x_i, x_j] (E x E pairs, explicitly), masked by the pair availability and averaged; then
  ``GatedEmbeddingUnitReasoning`` (fc_i + BN, BN of the mask, GLU, L2);
- similarity: ``sharded_cross_view_inner_product`` with availability-renormalised softmax
  weights; loss: ``MaxMarginRankingLoss`` with ``fix_norm=True`` (both directions, the
  diagonal terms dropped, mean); optimiser: ``torch.optim.Adam`` with its defaults.
It is a benchmark baseline, not a model rudder trains.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class NetVLADReference(nn.Module):
    def __init__(self, feature_size: int, clusters: int):
        super().__init__()
        scale = 1 / feature_size**0.5
        self.clusters = nn.Parameter(scale * torch.randn(feature_size, clusters))
        self.clusters2 = nn.Parameter(scale * torch.randn(1, feature_size, clusters))
        self.bn = nn.BatchNorm1d(clusters)
        self.out_dim = clusters * feature_size

    def forward(self, x):  # (B, N, D), padding included
        b, n, d = x.shape
        assignment = self.bn(x.reshape(-1, d) @ self.clusters).softmax(1).view(b, n, -1)
        a = assignment.sum(1, keepdim=True) * self.clusters2
        vlad = (assignment.transpose(1, 2) @ x).transpose(1, 2) - a
        vlad = F.normalize(vlad, dim=1).reshape(b, -1)
        return F.normalize(vlad, dim=1)


class ContextGating(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc, self.bn = nn.Linear(dim, dim), nn.BatchNorm1d(dim)

    def forward(self, x):
        return F.glu(torch.cat((x, self.bn(self.fc(x))), 1), 1)


class GatedEmbeddingUnit(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.fc, self.cg = nn.Linear(in_dim, out_dim), ContextGating(out_dim)

    def forward(self, x):
        return F.normalize(self.cg(self.fc(x)), dim=-1)


class GatedEmbeddingUnitReasoning(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc, self.bn1, self.bn2 = nn.Linear(dim, dim), nn.BatchNorm1d(dim), nn.BatchNorm1d(dim)

    def forward(self, x, mask):
        t = self.bn1(self.fc(x)) + self.bn2(mask)
        return F.normalize(F.glu(torch.cat((x, t), 1), 1), dim=-1)


class CENetReference(nn.Module):
    def __init__(self, expert_dims: dict, audio: tuple, text_dim: int, text_clusters: int,
                 dim: int, g_layers: int):
        super().__init__()
        self.fixed = list(expert_dims)
        frames_dim, audio_clusters = audio
        self.audio_vlad = NetVLADReference(frames_dim, audio_clusters)
        self.reduce = nn.ModuleList([nn.Linear(d, dim) for d in expert_dims.values()]
                                    + [nn.Linear(self.audio_vlad.out_dim, dim)])
        experts = len(self.reduce)
        self.text_vlad = NetVLADReference(text_dim, text_clusters)
        self.text_units = nn.ModuleList(GatedEmbeddingUnit(self.text_vlad.out_dim, dim)
                                        for _ in range(experts))
        self.moe_fc = nn.Linear(self.text_vlad.out_dim, experts)
        layers = [nn.Linear(2 * dim, dim)]
        for _ in range(g_layers - 1):
            layers += [nn.BatchNorm1d(dim), nn.Mish(), nn.Linear(dim, dim)]
        self.g = nn.Sequential(*layers)
        self.video_units = nn.ModuleList(GatedEmbeddingUnitReasoning(dim) for _ in range(experts))

    def forward(self, words, fixed, frames, available):
        text = self.text_vlad(words)
        text_emb = torch.stack([unit(text) for unit in self.text_units], 1)
        logits = self.moe_fc(text)
        audio = self.audio_vlad(frames * available[:, -1, None, None])
        inputs = [fixed[name] * available[:, i:i + 1] for i, name in enumerate(self.fixed)]
        x = [F.normalize(reduce(v), dim=-1)
             for reduce, v in zip(self.reduce, [*inputs, audio], strict=False)]
        video = []
        for i, xi in enumerate(x):  # CEModule, use_ce="pairwise", include_self=1
            total, count = 0, 0
            for j, xj in enumerate(x):
                pair = (available[:, i] * available[:, j]).unsqueeze(1)
                total = total + self.g(torch.cat((xi, xj), 1)) * pair
                count = count + pair
            video.append(self.video_units[i](xi, total / (count + 1e-11)))
        video_emb = torch.stack(video, 1)
        weights = logits.softmax(-1)
        numerator = torch.einsum("ted,ved->tv", text_emb * weights.unsqueeze(-1),
                                 video_emb * available.unsqueeze(-1))
        return numerator / (weights @ available.T)


def max_margin_loss(sims, margin: float = 0.09):
    """``MaxMarginRankingLoss(fix_norm=True)`` of the reference: caption i against video j and
    video i against caption j, both compared with ``sims[i, i]``; the diagonal terms dropped
    (with the reference's boolean selection), mean."""
    n = sims.shape[0]
    diagonal = sims.diag().view(-1, 1).expand(n, n).reshape(-1, 1)
    x1 = torch.cat((diagonal, diagonal))
    x = torch.cat((sims.reshape(-1, 1), sims.T.reshape(-1, 1)))
    keep = ~torch.eye(n, dtype=torch.bool, device=sims.device).reshape(-1)
    return F.relu(margin - (x1 - x))[torch.cat((keep, keep))].mean()


def reference_step(model, optimizer, batch) -> torch.Tensor:
    sims = model(*batch)
    loss = max_margin_loss(sims)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss
