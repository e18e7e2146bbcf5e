"""BatchNorm over the selected rows of a padded batch, with a closed-form backward.

NetVLAD's assignment BatchNorm and the gating's BatchNorms see padding and unavailable
experts; their statistics must come from the real rows only. Selecting the rows
(``x[mask]``) gives data-dependent shapes, which make a CUDA host wait and split
``torch.compile`` graphs, so the selection is done with weights instead. Differentiated by
autograd, one call took 86 small ops (forward, backward, running averages);
:class:`_MaskedBatchNorm` gives the same values in 66 by using BatchNorm's gradient in closed
form (Ioffe & Szegedy, "Batch Normalization", ICML 2015, section 3, restricted to the
selected rows): with ``n`` selected rows, ``x_hat = (x - mean) / sqrt(var + eps)`` (biased
``var``) and ``d = dL/dy * gamma``,
``dL/dx = (n d - sum d - x_hat sum(d x_hat)) / (n sqrt(var + eps))`` on selected rows, 0
elsewhere; ``dL/dgamma = sum dL/dy x_hat``, ``dL/dbeta = sum dL/dy``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


def masked_batch_norm(bn: nn.BatchNorm1d, x: Tensor, mask: Tensor) -> Tensor:
    """Apply ``bn`` to the rows of ``x`` (..., C) where ``mask`` (...) is True; others -> 0.

    Batch statistics (and the running averages) come from the selected rows only, so
    padding and unavailable experts never shift them. In training mode with fewer than
    two selected rows (where batch statistics are undefined) the running statistics are
    used instead, as in eval mode, and left unchanged. Everything has fixed shapes and no
    host synchronisation, which CUDA graphs and ``torch.compile`` need. Statistics are
    computed in float32 (as BatchNorm does under autocast); the result has ``x``'s dtype.
    The running variance is updated with the unbiased batch variance, as ``nn.BatchNorm1d``.
    A ``SyncBatchNorm`` is called on the selected rows (even zero of them) so that every
    process joins its collective; it then needs at least two selected rows over all processes.
    """
    if isinstance(bn, nn.SyncBatchNorm):
        out = x.new_zeros(x.shape)
        return out.masked_scatter(mask.unsqueeze(-1), bn(x[mask]))

    def update(mean, var, count):
        _update_running_stats(bn, mean, var, count, count >= 2)

    return _normalise(x, mask, tuple(range(x.dim() - 1)), bn, *_parameters([bn]), update)


def _parameters(bns) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """``(gamma, beta, running_mean, running_var)`` of one BatchNorm, or of several stacked
    (one row each); None where it has none."""
    def stacked(name):
        values = [getattr(bn, name) for bn in bns]
        return None if values[0] is None else values[0] if len(bns) == 1 else torch.stack(values)

    return stacked("weight"), stacked("bias"), stacked("running_mean"), stacked("running_var")


def _normalise(x: Tensor, mask: Tensor, dims: tuple, bn: nn.BatchNorm1d, gamma, beta,
               running_mean, running_var, update) -> Tensor:
    """The rows of ``x`` where ``mask`` is True normalised with their statistics over ``dims``
    (training, or no running statistics; ``update(mean, var, count)`` then moves them) or
    with the running ones; ``bn`` gives the mode and ``eps``."""
    keep = mask.unsqueeze(-1)
    values = torch.where(keep, x, 0.0).float()
    if bn.training or running_mean is None:
        out, mean, var, count = _MaskedBatchNorm.apply(
            values, keep, gamma, beta, running_mean, running_var, bn.eps, dims)
        if running_mean is not None:
            update(mean, var, count)
    else:
        out = _affine((values - running_mean) * torch.rsqrt(running_var + bn.eps), gamma, beta)
    return torch.where(keep, out, 0.0).to(x.dtype)


def _affine(normed: Tensor, gamma: Tensor | None, beta: Tensor | None) -> Tensor:
    # nn.BatchNorm1d has both (affine=True) or neither
    return normed if gamma is None or beta is None else normed * gamma + beta


class _MaskedBatchNorm(torch.autograd.Function):
    """``(out, batch mean, batch var, count)`` of the selected rows (module docstring), the
    statistics reduced over ``dims`` of ``values``; ``values`` are float32 and zero outside
    ``keep``. With running statistics given and fewer than two rows selected, they
    normalise instead (and the gradient is eval mode's)."""

    @staticmethod
    def forward(ctx, values, keep, gamma, beta, running_mean, running_var, eps, dims):
        weight = keep.to(values.dtype)
        count = weight.sum(dims)  # (1,)
        rows = count.clamp_min(1.0)
        mean = values.sum(dims) / rows
        centred = (values - mean) * weight
        var = (centred * centred).sum(dims) / rows
        if running_mean is not None:
            batch_stats = count >= 2
            mean_used = torch.where(batch_stats, mean, running_mean)
            var_used = torch.where(batch_stats, var, running_var)
        else:
            batch_stats = torch.ones_like(count, dtype=torch.bool)
            mean_used, var_used = mean, var
        inv_std = torch.rsqrt(var_used + eps)
        normed = (values - mean_used) * inv_std
        out = _affine(normed, gamma, beta)
        ctx.save_for_backward(normed, weight, gamma, inv_std, rows, batch_stats)
        ctx.dims = dims
        ctx.mark_non_differentiable(mean, var, count)
        return out, mean, var, count

    @staticmethod
    def backward(ctx, grad_out, _mean, _var, _count):
        normed, weight, gamma, inv_std, rows, batch_stats = ctx.saved_tensors
        dims = ctx.dims
        grad_out = grad_out * weight
        grad_normed = grad_out if gamma is None else grad_out * gamma
        batch = (rows * grad_normed - grad_normed.sum(dims)
                 - normed * (grad_normed * normed).sum(dims)) * (inv_std / rows)
        grad_values = torch.where(batch_stats, batch, grad_normed * inv_std) * weight
        grad_gamma = grad_beta = None
        if gamma is not None:  # summed to gamma's shape: slots may share one affine
            grad_gamma = (grad_out * normed).sum(dims).sum_to_size(gamma.shape)
            grad_beta = grad_out.sum(dims).sum_to_size(gamma.shape)
        return grad_values, None, grad_gamma, grad_beta, None, None, None, None


@torch.no_grad()
def _update_running_stats(bn, mean: Tensor, var: Tensor, count: Tensor, enough: Tensor) -> None:
    """BatchNorm's running averages, moved only where ``enough`` rows were selected."""
    bn.num_batches_tracked.add_(enough.long().squeeze())
    momentum, unbiased = _moving_average_terms(bn.momentum, bn.num_batches_tracked, var, count,
                                               enough)
    bn.running_mean.lerp_(mean, momentum)
    bn.running_var.lerp_(unbiased, momentum)


def _moving_average_terms(momentum: float | None, tracked: Tensor | None, var: Tensor,
                          count: Tensor, enough: Tensor) -> tuple[Tensor, Tensor]:
    """nn.BatchNorm1d's averaging weight (``momentum``, or 1 / ``tracked`` batches for a
    cumulative average when it is None; ``tracked`` is only read then), 0 where too few rows
    were selected; and the unbiased batch variance."""
    if momentum is None:
        assert tracked is not None  # BatchNorm tracks batches when momentum is None
        weight = enough.float() / tracked.clamp_min(1).float()
    else:
        weight = enough.float() * momentum
    return weight, _unbiased(var, count)


def _unbiased(var: Tensor, count: Tensor) -> Tensor:
    """The unbiased variance of ``count`` rows from their biased ``var``."""
    return var * count / (count - 1.0).clamp_min(1.0)


def slotwise_masked_batch_norm(bn: nn.BatchNorm1d, x: Tensor, mask: Tensor) -> Tensor:
    """``masked_batch_norm(bn, x[:, s], mask[:, s])`` for every slot ``s`` of ``x``
    (B, *S, C) and ``mask`` (B, *S), one BatchNorm called once per slot in row-major order,
    as CE's gating calls its shared g network once per expert pair and h once per expert:
    each slot is normalised with its own batch statistics, and the running averages end
    as those sequential calls leave them (momentum ``m``: ``r <- (1 - m) r + m s`` per
    slot with two or more rows, in closed form; ``None``: the cumulative average). A slot
    with fewer than two rows is normalised with the running statistics from before the
    call (sequential calls would see the earlier slots' updates)."""
    if isinstance(bn, nn.SyncBatchNorm):
        slots = x.flatten(1, -2)
        flat = mask.flatten(1)
        out = [masked_batch_norm(bn, slots[:, k], flat[:, k]) for k in range(flat.shape[1])]
        return torch.stack(out, dim=1).view(x.shape)

    def update(mean, var, count):  # one row per slot
        _update_sequential_running_stats(bn, mean.flatten(0, -2), var.flatten(0, -2),
                                         count.flatten(0, -2))

    return _normalise(x, mask, (0,), bn, *_parameters([bn]), update)


@torch.no_grad()
def _update_sequential_running_stats(bn, mean: Tensor, var: Tensor, count: Tensor) -> None:
    """``bn``'s running averages after one update per row of ``mean``/``var`` (P, C) in
    order, skipping rows with ``count`` (P, 1) below two."""
    enough = (count >= 2).float()
    unbiased = _unbiased(var, count)
    updates = enough.sum()
    if bn.momentum is None:  # the cumulative average over every update so far
        before = bn.num_batches_tracked.float()
        total = (before + updates).clamp_min(1.0)
        new_mean = (before * bn.running_mean + (enough * mean).sum(0)) / total
        new_var = (before * bn.running_var + (enough * unbiased).sum(0)) / total
        bn.running_mean.copy_(torch.where(updates > 0, new_mean, bn.running_mean))
        bn.running_var.copy_(torch.where(updates > 0, new_var, bn.running_var))
    else:  # r_P = prod_k f_k r_0 + sum_k m_k prod_{l > k} f_l s_k, f_k = 1 - m_k
        step = enough * bn.momentum
        keep = 1.0 - step
        later = torch.cat([keep.flip(0).cumprod(0).flip(0)[1:], keep.new_ones(1, 1)])
        carry = keep.prod(0)
        bn.running_mean.copy_(carry * bn.running_mean + (step * later * mean).sum(0))
        bn.running_var.copy_(carry * bn.running_var + (step * later * unbiased).sum(0))
    bn.num_batches_tracked.add_(updates.long())


def grouped_masked_batch_norm(bns: Sequence[nn.BatchNorm1d], x: Tensor, mask: Tensor) -> Tensor:
    """``masked_batch_norm(bns[e], x[:, e], mask[:, e])`` for every group ``e`` of ``x``
    (B, E, C) and ``mask`` (B, E), in one pass instead of E: CE's collaborative gating has
    two BatchNorms per expert. The BatchNorms must be configured alike (as the gating makes
    them); each keeps its own parameters and buffers, so checkpoints are unchanged."""
    first = bns[0]
    if isinstance(first, nn.SyncBatchNorm):
        return torch.stack([masked_batch_norm(bn, x[:, e], mask[:, e])
                            for e, bn in enumerate(bns)], dim=1)
    gamma, beta, running_mean, running_var = _parameters(bns)

    def update(mean, var, count):
        _update_grouped_running_stats(bns, running_mean, running_var, mean, var, count)

    return _normalise(x, mask, (0,), first, gamma, beta, running_mean, running_var, update)


@torch.no_grad()
def _update_grouped_running_stats(bns, running_mean, running_var, mean, var, count) -> None:
    """:func:`_update_running_stats` for every BatchNorm of a group at once (``mean`` and
    ``var`` (E, C), ``count`` (E, 1)), written back with one foreach copy per buffer."""
    enough = count >= 2
    tracked = [bn.num_batches_tracked for bn in bns]
    torch._foreach_add_(tracked, list(enough.long().view(-1).unbind()))
    tracked_now = torch.stack(tracked).unsqueeze(1) if bns[0].momentum is None else None
    momentum, unbiased = _moving_average_terms(bns[0].momentum, tracked_now, var, count, enough)
    torch._foreach_copy_([bn.running_mean for bn in bns],
                         list(running_mean.lerp(mean, momentum).unbind()))
    torch._foreach_copy_([bn.running_var for bn in bns],
                         list(running_var.lerp(unbiased, momentum).unbind()))
