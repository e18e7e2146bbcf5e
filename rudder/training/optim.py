"""The optimiser and learning-rate schedule of a run, built by name through registries.

``optim.name`` picks an entry of :data:`OPTIMIZERS`, ``optim.scheduler`` one of
:data:`SCHEDULERS` and ``optim.implementation`` one of :data:`IMPLEMENTATIONS`;
``rudder.config`` accepts exactly these names. The registries are declared (with their entry
types) in :mod:`rudder.config.schema`, whose rules name them, and filled here:
adding one is one function and one ``register`` line. torch is imported when a factory runs,
so reading a config does not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rudder.config.registry import Implementation
from rudder.config.schema import IMPLEMENTATIONS, OPTIMIZERS, SCHEDULERS

if TYPE_CHECKING:
    import torch
    from torch.optim.optimizer import ParamsT

    from rudder.config import OptimConfig

__all__ = ["IMPLEMENTATIONS", "OPTIMIZERS", "SCHEDULERS", "build_optimizer", "build_scheduler"]

# How torch runs the update: one fused kernel (torch's fused Adam/AdamW/SGD run on CPU and
# CUDA), multi-tensor ops, or one parameter at a time.
IMPLEMENTATIONS.register("fused", {"fused": True})
IMPLEMENTATIONS.register("foreach", {"foreach": True})
IMPLEMENTATIONS.register("loop", {"foreach": False})


def _adam(params: ParamsT, opt: OptimConfig, how: Implementation) -> torch.optim.Optimizer:
    import torch

    return torch.optim.Adam(params, lr=opt.lr, weight_decay=opt.weight_decay, **how)


def _adamw(params: ParamsT, opt: OptimConfig, how: Implementation) -> torch.optim.Optimizer:
    import torch

    return torch.optim.AdamW(params, lr=opt.lr, weight_decay=opt.weight_decay, **how)


def _sgd(params: ParamsT, opt: OptimConfig, how: Implementation) -> torch.optim.Optimizer:
    import torch

    return torch.optim.SGD(
        params, lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay, **how
    )


# optim.name -> factory(parameters, OptimConfig, implementation kwargs) -> torch.optim.Optimizer
OPTIMIZERS.register("adam", _adam)
OPTIMIZERS.register("adamw", _adamw)
OPTIMIZERS.register("sgd", _sgd)


def _step(optimizer: torch.optim.Optimizer, opt: OptimConfig,
          epochs: int) -> torch.optim.lr_scheduler.LRScheduler:
    import torch

    return torch.optim.lr_scheduler.StepLR(optimizer, opt.step_size, opt.gamma)


def _cosine(optimizer: torch.optim.Optimizer, opt: OptimConfig,
            epochs: int) -> torch.optim.lr_scheduler.LRScheduler:
    import torch

    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)


def _constant(optimizer: torch.optim.Optimizer, opt: OptimConfig,
              epochs: int) -> torch.optim.lr_scheduler.LRScheduler:
    import torch

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)


# optim.scheduler -> factory(optimizer, OptimConfig, epochs) -> LR scheduler stepped each epoch
SCHEDULERS.register("step", _step)
SCHEDULERS.register("cosine", _cosine)
SCHEDULERS.register("none", _constant)


def build_optimizer(parameters: ParamsT, opt: OptimConfig) -> torch.optim.Optimizer:
    """The optimiser ``opt.name`` over ``parameters``, run the ``opt.implementation`` way."""
    how = IMPLEMENTATIONS.pick(opt.implementation)
    return OPTIMIZERS.pick(opt.name)(parameters, opt, how)


def build_scheduler(optimizer: torch.optim.Optimizer, opt: OptimConfig,
                    epochs: int) -> torch.optim.lr_scheduler.LRScheduler:
    """The learning-rate schedule ``opt.scheduler`` of ``optimizer`` over ``epochs`` epochs."""
    return SCHEDULERS.pick(opt.scheduler)(optimizer, opt, epochs)
