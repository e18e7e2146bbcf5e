"""Masked NetVLAD pooling."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rudder.models.masked_batch_norm import masked_batch_norm


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
