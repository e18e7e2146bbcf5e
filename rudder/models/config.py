"""``ModelConfig``: which model (``name``) and the sizes and switches of
:class:`rudder.models.CollaborativeExperts`, the default model.

It is declared with the other config sections in :mod:`rudder.config.schema` (each field's
type, default, rule and meaning, with the reference implementation's values; docs/config.md
lists them); this module keeps its import path.
"""

from __future__ import annotations

from rudder.config.schema import ACTIVATIONS, ModelConfig

__all__ = ["ACTIVATIONS", "ModelConfig"]
