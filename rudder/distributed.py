"""Multi-process training with torchrun: process groups, gathers with gradients, and
gradient averaging (NCCL on CUDA, gloo on CPU).

Each process embeds its share of the global batch; embeddings are all-gathered *with
gradients* so every process computes the same B x B loss as a single process would. The
gather's backward sums every process's gradient for the local slice, i.e. ``world_size``
times the gradient of the (identical) loss; averaging the parameter gradients over the
processes afterwards gives exactly the single-process gradient.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: torch.device) -> DistContext:
    """Join the torchrun process group when launched by torchrun; otherwise one process."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def shard(batch: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """This process's contiguous share of a global batch (sizes differ by at most one)."""
    return torch.tensor_split(batch, ctx.world_size)[ctx.rank] if ctx.enabled else batch


def gather_with_grad(tensor: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """Concatenate every process's ``tensor`` along dim 0, keeping the autograd graph."""
    if not ctx.enabled:
        return tensor
    from torch.distributed.nn.functional import all_gather

    sizes = [torch.zeros(1, dtype=torch.long, device=tensor.device) for _ in range(ctx.world_size)]
    dist.all_gather(sizes, torch.tensor([len(tensor)], device=tensor.device))
    longest = int(max(s.item() for s in sizes))
    padded = torch.cat([tensor, tensor.new_zeros(longest - len(tensor), *tensor.shape[1:])])
    parts = all_gather(padded)
    return torch.cat([part[: int(size.item())] for part, size in zip(parts, sizes)])


def average_gradients(parameters, ctx: DistContext) -> None:
    """All-reduce the gradients (missing ones count as zero) and divide by the world size."""
    if not ctx.enabled:
        return
    params = [p for p in parameters if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat /= ctx.world_size
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
        offset += p.numel()


def broadcast_object(obj, ctx: DistContext):
    """Send a picklable object from rank 0 to every process."""
    if not ctx.enabled:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def barrier(ctx: DistContext) -> None:
    if ctx.enabled:
        dist.barrier()


def shutdown(ctx: DistContext) -> None:
    """End a worker cleanly: wait for every process, then leave the group."""
    if ctx.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
