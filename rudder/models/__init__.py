"""Collaborative Experts (Liu et al., BMVC 2019) and its parts: NetVLAD, gated units, gating.

``CollaborativeExperts`` is imported on first use, so that reading a :class:`ModelConfig`
(every command line does, before ``--help``) does not import torch.
"""

from rudder.models.config import ModelConfig

__all__ = ["CollaborativeExperts", "ModelConfig"]


def __getattr__(name: str):
    if name == "CollaborativeExperts":
        from rudder.models.ce import CollaborativeExperts

        return CollaborativeExperts
    raise AttributeError(f"module 'rudder.models' has no attribute {name!r}")
