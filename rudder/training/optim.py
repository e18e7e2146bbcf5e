"""The optimiser and learning-rate schedule of a run, built by name through registries.

``optim.name`` picks an entry of :data:`OPTIMIZERS`, ``optim.scheduler`` one of
:data:`SCHEDULERS` and ``optim.implementation`` one of :data:`IMPLEMENTATIONS`;
``rudder.config`` accepts exactly these names. Adding one is one function and one registry
line here. torch is imported when a factory runs, so reading a config does not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rudder.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from rudder.config import OptimConfig

# How torch runs the update: one fused kernel (torch's fused Adam/AdamW/SGD run on CPU and
# CUDA), multi-tensor ops, or one parameter at a time.
IMPLEMENTATIONS: dict[str, dict] = {
    "fused": {"fused": True},
    "foreach": {"foreach": True},
    "loop": {"foreach": False},
}


def _adam(params, opt: OptimConfig, how: dict):
    import torch

    return torch.optim.Adam(params, lr=opt.lr, weight_decay=opt.weight_decay, **how)


def _adamw(params, opt: OptimConfig, how: dict):
    import torch

    return torch.optim.AdamW(params, lr=opt.lr, weight_decay=opt.weight_decay, **how)


def _sgd(params, opt: OptimConfig, how: dict):
    import torch

    return torch.optim.SGD(
        params, lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay, **how
    )


# optim.name -> factory(parameters, OptimConfig, implementation kwargs) -> torch.optim.Optimizer
OPTIMIZERS = {
    "adam": _adam,
    "adamw": _adamw,
    "sgd": _sgd,
}


def _step(optimizer, opt: OptimConfig, epochs: int):
    import torch

    return torch.optim.lr_scheduler.StepLR(optimizer, opt.step_size, opt.gamma)


def _cosine(optimizer, opt: OptimConfig, epochs: int):
    import torch

    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)


def _constant(optimizer, opt: OptimConfig, epochs: int):
    import torch

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)


# optim.scheduler -> factory(optimizer, OptimConfig, epochs) -> LR scheduler stepped each epoch
SCHEDULERS = {
    "step": _step,
    "cosine": _cosine,
    "none": _constant,
}


def _entry(registry: dict, key: str, value: str):
    if value not in registry:
        raise ConfigError(f"{key}={value!r} is not valid; expected one of {list(registry)}")
    return registry[value]


def build_optimizer(parameters, opt: OptimConfig) -> torch.optim.Optimizer:
    """The optimiser ``opt.name`` over ``parameters``, run the ``opt.implementation`` way."""
    how = _entry(IMPLEMENTATIONS, "optim.implementation", opt.implementation)
    return _entry(OPTIMIZERS, "optim.name", opt.name)(parameters, opt, how)


def build_scheduler(optimizer: torch.optim.Optimizer, opt: OptimConfig, epochs: int):
    """The learning-rate schedule ``opt.scheduler`` of ``optimizer`` over ``epochs`` epochs."""
    return _entry(SCHEDULERS, "optim.scheduler", opt.scheduler)(optimizer, opt, epochs)
