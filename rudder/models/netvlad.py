"""Masked NetVLAD pooling and the masked BatchNorm it (and the gating) relies on."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def masked_batch_norm(bn: nn.BatchNorm1d, x: Tensor, mask: Tensor) -> Tensor:
    """Apply ``bn`` to the rows of ``x`` (..., C) where ``mask`` (...) is True; others -> 0.

    Batch statistics (and the running averages) come from the selected rows only, so
    padding and unavailable experts never shift them. In training mode with fewer than
    two selected rows (where batch statistics are undefined) the running statistics are
    used instead, as in eval mode, and left unchanged. Everything is masked arithmetic
    (sums weighted by the mask, ``torch.where``), so the result has fixed shapes and no
    host synchronisation, which CUDA graphs and ``torch.compile`` need. Statistics are
    computed in float32 (as BatchNorm does under autocast); the result has ``x``'s dtype.
    The running variance is updated with the unbiased batch variance, as ``nn.BatchNorm1d``.
    A ``SyncBatchNorm`` is called on the selected rows (even zero of them) so that every
    process joins its collective; it then needs at least two selected rows over all processes.
    """
    if isinstance(bn, nn.SyncBatchNorm):
        out = x.new_zeros(x.shape)
        return out.masked_scatter(mask.unsqueeze(-1), bn(x[mask]))
    keep = mask.unsqueeze(-1)
    values = torch.where(keep, x, 0.0).float()
    if bn.training or bn.running_mean is None:
        weight = keep.to(values.dtype)
        count = weight.sum(dim=tuple(range(weight.dim() - 1)))  # (1,)
        dims = tuple(range(values.dim() - 1))
        mean = values.sum(dims) / count.clamp_min(1.0)
        var = ((values - mean) ** 2 * weight).sum(dims) / count.clamp_min(1.0)
        if bn.running_mean is not None:
            enough = count >= 2
            _update_running_stats(bn, mean.detach(), var.detach(), count, enough)
            mean = torch.where(enough, mean, bn.running_mean)
            var = torch.where(enough, var, bn.running_var)
    else:
        mean, var = bn.running_mean, bn.running_var
    out = (values - mean) * torch.rsqrt(var + bn.eps)
    if bn.affine:
        out = out * bn.weight + bn.bias
    return torch.where(keep, out, 0.0).to(x.dtype)


@torch.no_grad()
def _update_running_stats(bn, mean: Tensor, var: Tensor, count: Tensor, enough: Tensor) -> None:
    """BatchNorm's running averages, moved only where ``enough`` rows were selected."""
    bn.num_batches_tracked.add_(enough.long().squeeze())
    if bn.momentum is None:  # cumulative moving average, as nn.BatchNorm1d
        momentum = enough.float() / bn.num_batches_tracked.clamp_min(1).float()
    else:
        momentum = enough.float() * bn.momentum
    unbiased = var * count / (count - 1.0).clamp_min(1.0)
    bn.running_mean.lerp_(mean, momentum)
    bn.running_var.lerp_(unbiased, momentum)


class NetVLAD(nn.Module):
    """NetVLAD (Arandjelovic et al., CVPR 2016) over a padded set, with padding masked.

    Follows ``model/net_vlad.py`` of albanie/collaborative-experts (after Miech et al.'s
    LOUPE port): soft assignment a_nk = softmax_k(BN(x_n W))_k over K + G clusters (G
    ghost clusters, Zhong et al. 2018, dropped after the softmax), residuals
    V_k = sum_n a_nk (x_n - c_k), intra-normalisation (L2 of each V_k), flattening and a
    final L2 norm. Output size K * D.

    Deviations from the reference, deliberately:
    - the reference accepts a mask and ignores it, so padding frames/words take part in
      the assignments, the sums and the BatchNorm statistics. Here frames with
      ``mask == False`` get zero assignment and are left out of the BatchNorm batch
      statistics; their values (even NaN) never reach the output.
    - the flattening order is cluster-major (k * D + d) instead of feature-major; a
      permutation that the following Linear layer absorbs.
    A row with no real frame pools to the zero vector. ``use_batchnorm=False`` drops the
    assignment BatchNorm (the model's ``use_batchnorm`` switch; used where per-process batch
    statistics would differ, e.g. comparing one process with several).
    """

    def __init__(self, feature_size: int, cluster_size: int, ghost_clusters: int = 0,
                 use_batchnorm: bool = True):
        super().__init__()
        self.feature_size = feature_size
        self.cluster_size = cluster_size
        self.ghost_clusters = ghost_clusters
        init_scale = 1.0 / math.sqrt(feature_size)
        total = cluster_size + ghost_clusters
        self.assign_weight = nn.Parameter(init_scale * torch.randn(feature_size, total))
        self.assign_bn = nn.BatchNorm1d(total) if use_batchnorm else None
        self.centroids = nn.Parameter(init_scale * torch.randn(cluster_size, feature_size))
        self.out_dim = cluster_size * feature_size

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Pool ``x`` (B, N, D) with ``mask`` (B, N) bool, True on real items -> (B, K*D)."""
        if x.dim() != 3 or x.shape[-1] != self.feature_size:
            raise ValueError(
                f"NetVLAD: expected input (B, N, {self.feature_size}), got {tuple(x.shape)}"
            )
        if mask.dtype != torch.bool or mask.shape != x.shape[:2]:
            raise ValueError(
                f"NetVLAD: expected a bool mask of shape {tuple(x.shape[:2])}, "
                f"got {mask.dtype} {tuple(mask.shape)}"
            )
        x = torch.where(mask.unsqueeze(-1), x, 0.0)
        logits = x @ self.assign_weight
        if self.assign_bn is not None:
            logits = masked_batch_norm(self.assign_bn, logits, mask)
        assign = torch.softmax(logits, dim=-1)[..., : self.cluster_size]
        assign = assign * mask.unsqueeze(-1).to(assign.dtype)  # (B, N, K)
        residuals = torch.einsum("bnk,bnd->bkd", assign, x)
        residuals = residuals - assign.sum(1).unsqueeze(-1) * self.centroids
        residuals = F.normalize(residuals, dim=-1)  # intra-normalisation
        return F.normalize(residuals.flatten(1), dim=-1)
