"""Which torch device a run uses (training, evaluation, experiments)."""

from __future__ import annotations

import torch

from rudder.errors import ConfigError


def pick_device(name: str) -> torch.device:
    """``auto`` uses CUDA when present; asking for CUDA without it is an error."""
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was requested but CUDA is not available; use auto or cpu")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def upload(tensor: torch.Tensor, device: torch.device, dtype: torch.dtype | None = None):
    """``tensor`` on ``device`` (in ``dtype``) without making the host wait: a host tensor
    bound for CUDA is copied through pinned memory with ``non_blocking`` (a plain ``.to``
    from pageable memory synchronises the stream; torch's caching host allocator keeps the
    pinned copy alive until the transfer is done)."""
    if dtype is not None and tensor.device.type == "cpu":
        tensor = tensor.to(dtype)  # convert on the host, transfer once
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, dtype, non_blocking=True)
    return tensor.to(device, dtype)
