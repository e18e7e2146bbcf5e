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
