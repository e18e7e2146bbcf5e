"""Collaborative Experts (Liu et al., BMVC 2019) and its parts: NetVLAD, gated units, gating."""

from rudder.models.ce import CollaborativeExperts
from rudder.models.config import ModelConfig

__all__ = ["CollaborativeExperts", "ModelConfig"]
