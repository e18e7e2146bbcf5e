"""Multi-process training with torchrun: process groups, the DDP-wrapped encoder, gathers
with gradients (NCCL on CUDA, gloo on CPU).

Each process embeds its share of the global batch through ``DistributedDataParallel``;
embeddings are all-gathered *with gradients* (the open_clip pattern) so every process
computes the same B x B loss as a single process would. The gather's backward sums every
process's gradient for the local slice, i.e. ``world_size`` times the gradient of the
(identical) loss; DDP's bucketed all-reduce averages the parameter gradients over the
processes, overlapping with the backward pass, which gives exactly the single-process
gradient. Each process uses the GPU of its ``LOCAL_RANK``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from rudder.errors import RudderError
from rudder.models import interface


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


class DistributedSetupError(RudderError):
    """A torchrun launch that cannot work on this machine; the message says how to launch it."""


def init_distributed(device: torch.device) -> DistContext:
    """Join the torchrun process group when launched by torchrun; otherwise one process.

    On CUDA each process takes ``cuda:LOCAL_RANK``; more processes on a machine than GPUs
    is an error that names the fix (fewer processes, or ``--device cpu`` for gloo).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
        gpus = torch.cuda.device_count()
        if local_world > gpus:
            raise DistributedSetupError(
                f"{local_world} processes on this machine but {gpus} GPU(s): launch torchrun with "
                f"--nproc_per_node={gpus}, or train on the CPU with --device cpu (gloo backend)"
            )
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank)


class PairEncoder(torch.nn.Module):
    """``model``'s text and video encoders behind one ``forward`` (what DDP wraps)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tokens, mask, features, frame_masks, available):
        model = interface(self.model)
        text, logits = model.encode_text(tokens, mask)
        return text, logits, model.encode_video(features, frame_masks, available)


def wrap_encoder(model: torch.nn.Module, ctx: DistContext, device: torch.device,
                 compile_mode: str = "none"):
    """The encoder a training step calls: ``PairEncoder(model)``, inside DDP when distributed,
    compiled with ``torch.compile(mode=compile_mode)`` unless ``"none"``."""
    encoder: torch.nn.Module = PairEncoder(model)
    if ctx.enabled:
        from torch.nn.parallel import DistributedDataParallel

        ids = ([device.index if device.index is not None else ctx.local_rank]
               if device.type == "cuda" else None)
        encoder = DistributedDataParallel(encoder, device_ids=ids)
    return encoder if compile_mode == "none" else CompiledOrEager(encoder, compile_mode)


class CompiledOrEager:
    """Call ``torch.compile(module, mode)``; if compiling fails (no compiler, an unsupported
    op), warn once and run the module eagerly from then on, so a run never dies of it."""

    def __init__(self, module: torch.nn.Module, mode: str):
        self.module, self.mode = module, mode
        self.compiled: Callable[..., Any] | None = torch.compile(module, mode=mode)

    def __call__(self, *args):
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except Exception as error:  # noqa: BLE001 -- inductor and dynamo fail in many ways
                import logging

                logging.getLogger("rudder.train").warning(
                    "torch.compile(mode=%r) failed (%s: %s); training continues without it",
                    self.mode, type(error).__name__,
                    str(error).splitlines()[0][:200] if str(error) else "",
                )
                self.compiled = None
        return self.module(*args)


def shard_sizes(total: int, ctx: DistContext) -> list[int]:
    """How many of ``total`` batch items each process takes: contiguous shares that differ by
    at most one, the first ``total % world_size`` one larger (``torch.tensor_split``)."""
    world = ctx.world_size if ctx.enabled else 1
    return [total // world + (rank < total % world) for rank in range(world)]


def shard(batch: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """This process's contiguous share of a global batch (:func:`shard_sizes`)."""
    return torch.tensor_split(batch, ctx.world_size)[ctx.rank] if ctx.enabled else batch


class _GatherRows(torch.autograd.Function):
    """All-gather of equal ``(rows, cols)`` blocks along dim 0 whose backward hands each
    process the sum over processes of the gradient of its own block, as
    ``torch.distributed.nn.functional.all_gather`` does (deprecated in torch 2.13), through
    ``all_gather_single`` (torch 2.13's name; ``all_gather_into_tensor`` before) and
    ``all_reduce``."""

    @staticmethod
    def forward(ctx, block: torch.Tensor) -> torch.Tensor:
        ctx.rows = len(block)
        gathered = block.new_empty(len(block) * dist.get_world_size(), *block.shape[1:])
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(gathered, block.contiguous())
        return gathered

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad)
        start = dist.get_rank() * ctx.rows
        return grad[start : start + ctx.rows]


def gather_with_grad(tensors: list[torch.Tensor], ctx: DistContext,
                     total: int) -> list[torch.Tensor]:
    """Every process's share (:func:`shard`) of a ``total``-item batch, concatenated along dim
    0 for each of ``tensors``, keeping the autograd graph. The tensors travel as float32 in
    one packed all-gather (one collective, not one per tensor) and come back in their own
    dtypes. The share sizes are known on every host, so nothing else is exchanged or read
    back."""
    if not ctx.enabled:
        return [t.float() if t.is_floating_point() else t for t in tensors]
    sizes = shard_sizes(total, ctx)
    rows = len(tensors[0])
    flat = [t.reshape(rows, -1).float() for t in tensors]
    packed = torch.cat(flat, dim=1)
    packed = torch.cat([packed, packed.new_zeros(max(sizes) - rows, packed.shape[1])])
    blocks = _GatherRows.apply(packed).split(max(sizes))
    gathered = torch.cat([block[:size] for block, size in zip(blocks, sizes, strict=True)])
    parts = gathered.split([f.shape[1] for f in flat], dim=1)
    shaped = [part.reshape(total, *t.shape[1:]) for part, t in zip(parts, tensors, strict=True)]
    return [p if t.is_floating_point() else p.to(t.dtype)
            for p, t in zip(shaped, tensors, strict=True)]


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
